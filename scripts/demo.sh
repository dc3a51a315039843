#!/usr/bin/env bash
# Build the patched server (optimized), start a demo cluster under
# work/demo, run a short pgbench workload and a CHECKPOINT, and show what a
# DBA would look at.
. "$(dirname "$0")/lib.sh"
if [ "$(id -u)" = 0 ]; then "$TOP/scripts/deps.sh"; fi
as_builder_reexec "$@"
"$TOP/scripts/deps.sh"   # as a normal user: fails with the apt-get line if anything is missing

"$TOP/scripts/build.sh" release
build_config release
BIN=$PREFIX/bin
DEMO=$WORK/demo
PGDATA=$DEMO/data
PORT=${DEMO_PORT:-5499}
export PGHOST=localhost PGPORT=$PORT PGDATABASE=postgres PGUSER=$(id -un)

if [ -f "$PGDATA/postmaster.pid" ]; then
  "$BIN/pg_ctl" -D "$PGDATA" stop -m fast >/dev/null 2>&1 || true
fi
rm -rf "$DEMO"
mkdir -p "$DEMO"
msg "initdb (data checksums on) in $PGDATA"
"$BIN/initdb" -D "$PGDATA" --data-checksums -A trust -E UTF8 --locale=C.UTF-8 >"$DEMO/initdb.log"
cat >>"$PGDATA/postgresql.conf" <<CONF
port = $PORT
listen_addresses = 'localhost'
unix_socket_directories = ''
shared_buffers = 256MB
max_wal_size = 2GB
log_checkpoints = on
checkpoint_sort = on
track_io_timing = on
CONF
"$BIN/pg_ctl" -D "$PGDATA" -l "$DEMO/server.log" -w start >/dev/null
msg "server running on port $PORT (log: $DEMO/server.log)"

PSQL=("$BIN/psql" -X -q -v ON_ERROR_STOP=1)
msg "pgbench -i -s 20, then 20 s of TPC-B-like load with 4 clients"
"$BIN/pgbench" -i -s 20 -q >"$DEMO/pgbench-init.log" 2>&1
"${PSQL[@]}" -c "SELECT pg_stat_reset_shared('checkpointer'); SELECT pg_stat_reset_shared('io');" >/dev/null
"$BIN/pgbench" -M prepared -c 4 -j 2 -T 20 -P 5 2>&1 | grep -E '^(progress|tps|latency average)'
msg "CHECKPOINT"
"${PSQL[@]}" -c CHECKPOINT

echo
echo "--- checkpoint log lines ($DEMO/server.log)"
grep -E 'checkpoint (starting|complete)' "$DEMO/server.log" | sed 's/^.*LOG:  /LOG:  /'
echo
echo "--- pg_stat_checkpointer"
"${PSQL[@]}" -x -c "SELECT num_timed, num_requested, num_done, write_time, sync_time, sort_time, buffers_written, stats_reset FROM pg_stat_checkpointer"
echo "--- pg_stat_io, checkpointer"
"${PSQL[@]}" -c "SELECT object, context, writes, write_bytes, round((write_bytes / nullif(writes, 0))::numeric) AS bytes_per_write, write_time, writebacks, fsyncs FROM pg_stat_io WHERE backend_type = 'checkpointer' AND (writes > 0 OR fsyncs > 0)"
cat <<TXT
The demo server keeps running.
  connect:  $BIN/psql -h localhost -p $PORT -U $PGUSER postgres
  stop:     make demo-stop   (or: $BIN/pg_ctl -D $PGDATA stop)
TXT
