#!/usr/bin/env bash
# Build the patched server (optimized), start a demo cluster under
# work/demo, run a short pgbench workload, watch the spread checkpoint that
# follows in pg_stat_progress_checkpoint, and show what a DBA would look at.
. "$(dirname "$0")/../lib.sh"
if [ "$(id -u)" = 0 ]; then "$TOP/scripts/build/deps.sh"; fi
as_builder_reexec "$@"
"$TOP/scripts/build/deps.sh"   # as a normal user: fails with the apt-get line if anything is missing

"$TOP/scripts/build/build.sh" release
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
# the series' SQL views (pg_stat_progress_checkpoint, pg_checkpoint_stats)
"${PSQL[@]}" -c "CREATE EXTENSION pg_checkpoint_stats" >/dev/null
"${PSQL[@]}" -c "SELECT pg_stat_reset_shared('checkpointer'); SELECT pg_stat_reset_shared('io');" >/dev/null
"$BIN/pgbench" -M prepared -c 4 -j 2 -T 20 -P 5 2>&1 | grep -E '^(progress|tps|latency average)'

# A spread (not immediate) checkpoint: a timed one, with checkpoint_timeout
# lowered to its minimum so that it starts at once and writes for
# checkpoint_completion_target (0.9) of 30 s.
msg "a timed checkpoint (checkpoint_timeout = 30s), sampled from pg_stat_progress_checkpoint"
"${PSQL[@]}" -c "ALTER SYSTEM SET checkpoint_timeout = '30s'" -c "SELECT pg_reload_conf()" >/dev/null
# one line per phase and per tenth of the buffers written
PROGRESS="SELECT phase || (10 * buffers_processed / greatest(buffers_total, 1)) || '|' ||
    format('%s  %-22s [%-20s] %3s%%  %s/%s buffers, %s writes, schedule: time %s, wal %s%s',
    to_char(clock_timestamp(), 'HH24:MI:SS'), phase,
    repeat('#', (20 * buffers_processed / greatest(buffers_total, 1))::int),
    100 * buffers_processed / greatest(buffers_total, 1),
    buffers_processed, buffers_total, write_ios,
    coalesce(round(100 * time_target) || '%', '-'), coalesce(round(100 * wal_target) || '%', '-'),
    CASE WHEN files_to_sync > 0 THEN format(', synced %s/%s files', files_synced, files_to_sync) END)
  FROM pg_stat_progress_checkpoint"
seen=0 last=
for _ in $(seq 1 300); do      # at most about 75 s
  line=$("${PSQL[@]}" -At -c "$PROGRESS")
  if [ -n "$line" ]; then
    [ $seen = 1 ] || "${PSQL[@]}" -At -c "SELECT format('%s  %s started at %s (flags: %s)', to_char(clock_timestamp(), 'HH24:MI:SS'), type, to_char(start_time, 'HH24:MI:SS'), flags) FROM pg_stat_progress_checkpoint"
    seen=1
    [ "${line%%|*}" = "$last" ] || echo "${line#*|}"
    last=${line%%|*}
  elif [ $seen = 1 ]; then
    break
  fi
  sleep 0.25
done
[ $seen = 1 ] || echo "(no checkpoint started within 75 s)"
"${PSQL[@]}" -c "ALTER SYSTEM RESET checkpoint_timeout" -c "SELECT pg_reload_conf()" >/dev/null

echo
echo "--- checkpoint log lines ($DEMO/server.log)"
grep -E 'checkpoint (starting|complete)' "$DEMO/server.log" | sed 's/^.*LOG:  /LOG:  /' | tail -4
echo
echo "--- pg_stat_checkpointer"
"${PSQL[@]}" -x -c "SELECT num_timed, num_requested, num_done, write_time, sync_time, s.sort_time, buffers_written, s.write_ios, round(buffers_written::numeric / nullif(s.write_ios, 0), 1) AS blocks_per_write, stats_reset FROM pg_stat_checkpointer, pg_checkpoint_stats s"
echo "--- pg_stat_io, checkpointer"
"${PSQL[@]}" -c "SELECT object, context, writes, write_bytes, round((write_bytes / nullif(writes, 0))::numeric) AS bytes_per_write, write_time, writebacks, fsyncs FROM pg_stat_io WHERE backend_type = 'checkpointer' AND (writes > 0 OR fsyncs > 0)"
cat <<TXT
The demo server keeps running.
  connect:  $BIN/psql -h localhost -p $PORT -U $PGUSER postgres
  stop:     make demo-stop   (or: $BIN/pg_ctl -D $PGDATA stop)
TXT
