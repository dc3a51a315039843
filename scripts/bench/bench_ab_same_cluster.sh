#!/usr/bin/env bash
# A/B of two builds of the series on ONE cluster (bench-results/README.md,
# "Immediate checkpoints"): the same data directory and files, started
# alternately with the current build ($WORK/inst-release, "new") and a
# previous one ($WORK/inst-prev, scripts/build/build-prev.sh; "old"), the order
# alternating per iteration; io_method io_uring, debug_io_direct = data,
# shared_buffers 896MB; an immediate CHECKPOINT of a 512 MB table with every
# page dirty; prints "ITERATION new|old total=S s" from the "checkpoint
# complete" line.  Takes the clusters' files out of a comparison of builds.
#   N=30 bash scripts/bench/bench_ab_same_cluster.sh
# Environment: N [8] iterations (each runs both builds); BENCH_PORT [5600]:
# the cluster listens on localhost, port BENCH_PORT + 71.  The cluster is
# $WORK/bench/ab-same-cluster (its server log: log in it).
. "$(dirname "$0")/../lib.sh"
as_builder_reexec "$@"

D=$WORK/bench/ab-same-cluster
P=$((${BENCH_PORT:-5600} + 71))
NEW=$WORK/inst-release/bin
OLD=$WORK/inst-prev/bin
for b in "$NEW" "$OLD"; do
  [ -x "$b/pg_ctl" ] || die "no $b/pg_ctl (make build-release; scripts/build/build-prev.sh REV)"
done
rm -rf "$D"
mkdir -p "$(dirname "$D")"
"$NEW/initdb" -D "$D" -U postgres >/dev/null
cat >> "$D/postgresql.conf" <<CONF
port=$P
listen_addresses='localhost'
unix_socket_directories=''
shared_buffers=896MB
io_method=io_uring
debug_io_direct=data
log_checkpoints=on
checkpoint_timeout=1h
max_wal_size=8GB
autovacuum=off
logging_collector=off
CONF
psqlc() { "$NEW/psql" -X -q -At -h localhost -p "$P" -U postgres -d postgres -c "$1"; }
"$NEW/pg_ctl" -D "$D" -l "$D/log" -w start >/dev/null
psqlc "CREATE TABLE t (id int, pad text, u int) WITH (fillfactor=50)"
psqlc "INSERT INTO t SELECT g, repeat('x', 1000), 0 FROM generate_series(1, 196608) g"
psqlc "CHECKPOINT"
"$NEW/pg_ctl" -D "$D" -w stop >/dev/null
for i in $(seq 1 "${N:-8}"); do
  order="new old"; [ $((i % 2)) = 0 ] && order="old new"
  for b in $order; do
    bin=$NEW; [ "$b" = old ] && bin=$OLD
    "$bin/pg_ctl" -D "$D" -l "$D/log" -w start >/dev/null
    psqlc "VACUUM (FREEZE) t" >/dev/null; psqlc "SELECT count(*) FROM t" >/dev/null; psqlc "CHECKPOINT"
    psqlc "UPDATE t SET u = u + 1" >/dev/null
    off=$(stat -c %s "$D/log")
    psqlc "CHECKPOINT"
    t=$(tail -c +$((off + 1)) "$D/log" | grep -o 'total=[0-9.]* s' | tail -1 || true)
    echo "$i $b $t"
    "$bin/pg_ctl" -D "$D" -w stop >/dev/null
  done
done
