#!/usr/bin/env bash
# Blocks per write of the client backends and the background writer under
# pgbench (bench-results/README.md, "Blocks per write under pgbench"):
#   bash scripts/bench/bench_blocks_per_write.sh
# For each pgbench script in BPW_SCRIPTS and each installation in BPW_BUILDS
# ($WORK/inst-NAME; one that is not installed is skipped), one run, in that
# order: a fresh cluster (data checksums on) with shared_buffers 128MB,
# checkpoint_timeout 30s, max_wal_size 8GB; pgbench -i -s 50 (~750 MB);
# CHECKPOINT and pg_stat_reset_shared('io'); T seconds of pgbench -c 8 -j 2
# -M prepared; then pg_stat_io (object relation): writes and blocks per write
# (write_bytes / writes / 8192) of the client backends, the background writer
# and the checkpointer per context, and of backends and bgwriter together.
# Scripts: "tpcb" is pgbench's built-in TPC-B-like transaction (uniformly
# random accounts); "zipf" the same transaction with the account drawn from
# a Zipfian distribution (random_zipfian(1, 100000 * scale, 1.01): hot
# accounts, so hot blocks, are neighbours, as with time-ordered data).
# Environment (defaults in brackets):
#   BPW_BUILDS ["upstream prev release"]  upstream = 18.6, release = the
#       series, prev = a previous build of the series
#       (scripts/build/build-prev.sh)
#   BPW_SCRIPTS ["tpcb zipf"]
#   T [60]             seconds of pgbench per run
#   EXTRA []           more postgresql.conf lines for every cluster
#   BENCH_PORT [5600]  the cluster listens on localhost, port BENCH_PORT + 70
# Clusters, logs and the Zipfian script are under $WORK/bench/blocks-per-write/;
# the results go to stdout.
. "$(dirname "$0")/../lib.sh"
as_builder_reexec "$@"

OUT=$WORK/bench/blocks-per-write
PORT=$((${BENCH_PORT:-5600} + 70))
mkdir -p "$OUT"
cat > "$OUT/zipf.sql" <<'S'
\set aid random_zipfian(1, 100000 * :scale, 1.01)
\set bid random(1, 1 * :scale)
\set tid random(1, 10 * :scale)
\set delta random(-5000, 5000)
BEGIN;
UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
UPDATE pgbench_tellers SET tbalance = tbalance + :delta WHERE tid = :tid;
UPDATE pgbench_branches SET bbalance = bbalance + :delta WHERE bid = :bid;
INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP);
END;
S
for script in ${BPW_SCRIPTS:-tpcb zipf}; do
  for v in ${BPW_BUILDS:-upstream prev release}; do
    B=$WORK/inst-$v/bin
    if [ ! -x "$B/pg_ctl" ]; then
      msg "$script $v: no $B/pg_ctl, skipped"
      continue
    fi
    D=$OUT/data-$v
    "$B/pg_ctl" -D "$D" -w stop -m fast >/dev/null 2>&1 || true
    rm -rf "$D"
    "$B/initdb" -D "$D" -k -A trust >/dev/null
    cat >> "$D/postgresql.conf" <<C
shared_buffers=128MB
port=$PORT
listen_addresses='localhost'
unix_socket_directories=''
max_wal_size=8GB
checkpoint_timeout=30s
${EXTRA:-}
C
    "$B/pg_ctl" -D "$D" -l "$OUT/$v.log" -w start >/dev/null
    P=("$B/psql" -h localhost -p "$PORT" -d postgres -qAtX)
    "$B/pgbench" -h localhost -p "$PORT" -i -s 50 -q postgres >/dev/null 2>&1
    "${P[@]}" -c "checkpoint" -c "select pg_stat_reset_shared('io')"
    if [ "$script" = tpcb ]; then S=(); else S=(-f "$OUT/zipf.sql" -D scale=50); fi
    tps=$("$B/pgbench" -h localhost -p "$PORT" -c 8 -j 2 -T "${T:-60}" -M prepared "${S[@]}" postgres 2>&1 |
          sed -n 's/^tps = \([0-9.]*\).*/\1/p')
    "${P[@]}" -c "select pg_stat_force_next_flush()" >/dev/null
    echo "$script $v: tps=$tps $("${P[@]}" -c "select string_agg(backend_type||'/'||context||' writes='||writes||' bpw='||round(write_bytes/nullif(writes,0)/8192.0,2), '; ' order by backend_type) from pg_stat_io where object='relation' and writes>0 and backend_type in ('client backend','background writer','checkpointer')")"
    echo "$script $v: backends+bgwriter bpw=$("${P[@]}" -c "select round(sum(write_bytes)/sum(writes)/8192.0,3) from pg_stat_io where object='relation' and backend_type in ('client backend','background writer')")"
    "$B/pg_ctl" -D "$D" -w stop >/dev/null
  done
done
