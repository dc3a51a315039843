# Blocks per write of backends + bgwriter under pgbench, shared_buffers=128MB,
# scale 50 (~750 MB of data), for 18.6 (upstream), series v4 (prev) and v5
# (release): the built-in TPC-B-like script (uniformly random accounts), and
# the same transaction with the account drawn from a Zipfian distribution
# (random_zipfian(1, 5000000, 1.01): hot accounts, so hot blocks, are
# neighbours, as with time-ordered or clustered data).
# Run as the build user: bash bench-results/v5-pgbench-blocks-per-write-2026-11-25.sh
W=${WORK:-/work/main/work}
cat > /tmp/bpw-zipf.sql <<'S'
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
for script in tpcb zipf; do
for v in upstream prev release; do
B=$W/inst-$v/bin
D=/tmp/bpw/$v
$B/pg_ctl -D $D -w stop -m fast >/dev/null 2>&1
rm -rf $D; mkdir -p /tmp/bpw
$B/initdb -D $D -k -A trust >/dev/null
cat >> $D/postgresql.conf <<C
shared_buffers=128MB
port=5497
unix_socket_directories='/tmp/bpw'
max_wal_size=8GB
checkpoint_timeout=30s
C
$B/pg_ctl -D $D -l $D.log -w start >/dev/null
P="$B/psql -h /tmp/bpw -p 5497 -d postgres -qAtX"
$B/pgbench -h /tmp/bpw -p 5497 -i -s 50 -q postgres >/dev/null 2>&1
$P -c "checkpoint" -c "select pg_stat_reset_shared('io')"
if [ $script = tpcb ]; then S=""; else S="-f /tmp/bpw-zipf.sql -D scale=50"; fi
tps=$($B/pgbench -h /tmp/bpw -p 5497 -c 8 -j 2 -T ${T:-60} -M prepared $S postgres 2>&1 | sed -n 's/^tps = \([0-9.]*\).*/\1/p')
$P -c "select pg_stat_force_next_flush()" >/dev/null
echo "$script $v: tps=$tps $($P -c "select string_agg(backend_type||'/'||context||' writes='||writes||' bpw='||round(write_bytes/nullif(writes,0)/8192.0,2), '; ' order by backend_type) from pg_stat_io where object='relation' and writes>0 and backend_type in ('client backend','background writer','checkpointer')")"
echo "$script $v: backends+bgwriter bpw=$($P -c "select round(sum(write_bytes)/sum(writes)/8192.0,3) from pg_stat_io where object='relation' and backend_type in ('client backend','background writer')")"
$B/pg_ctl -D $D -w stop >/dev/null
done
done
