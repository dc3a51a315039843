#!/bin/bash
# A/B on ONE cluster: the same data directory and files, started alternately
# with the v2 build and the previous build; direct I/O, io_uring; immediate
# CHECKPOINT of a 512 MB all-dirty table; total time from the log line.
set -e
W=/work/main/work; D=$W/ab-data; P=5790
NEW=$W/inst-release/bin; OLD=$W/inst-prev/bin
rm -rf $D; $NEW/initdb -D $D -U postgres >/dev/null
cat >> $D/postgresql.conf <<CONF
port=$P
shared_buffers=896MB
io_method=io_uring
debug_io_direct=data
log_checkpoints=on
checkpoint_timeout=1h
max_wal_size=8GB
autovacuum=off
logging_collector=off
CONF
psqlc() { $NEW/psql -X -q -At -h /tmp -p $P -U postgres -d postgres -c "$1"; }
$NEW/pg_ctl -D $D -l $D/log -w start >/dev/null
psqlc "CREATE TABLE t (id int, pad text, u int) WITH (fillfactor=50)"; psqlc "INSERT INTO t SELECT g, repeat('x', 1000), 0 FROM generate_series(1, 196608) g"; psqlc "CHECKPOINT"
$NEW/pg_ctl -D $D -w stop >/dev/null
for i in $(seq 1 ${N:-8}); do
  order="new old"; [ $((i % 2)) = 0 ] && order="old new"
  for b in $order; do
    bin=$NEW; [ $b = old ] && bin=$OLD
    $bin/pg_ctl -D $D -l $D/log -w start >/dev/null
    psqlc "VACUUM (FREEZE) t" >/dev/null; psqlc "SELECT count(*) FROM t" >/dev/null; psqlc "CHECKPOINT"
    psqlc "UPDATE t SET u = u + 1" >/dev/null
    off=$(stat -c %s $D/log)
    psqlc "CHECKPOINT"
    t=$(tail -c +$((off+1)) $D/log | grep -o 'total=[0-9.]* s' | tail -1)
    echo "$i $b $t"
    $bin/pg_ctl -D $D -w stop >/dev/null
  done
done
