# blocks per write of backends + bgwriter under pgbench, shared_buffers=128MB, scale 50
for v in upstream release; do
B=/work/main/work/inst-$v/bin
D=/tmp/bpw/$v
$B/pg_ctl -D $D -w stop -m fast >/dev/null 2>&1
rm -rf $D
$B/initdb -D $D -k -A trust >/dev/null
cat >> $D/postgresql.conf <<C
shared_buffers=128MB
port=5497
unix_socket_directories='/tmp/bpw'
max_wal_size=8GB
checkpoint_timeout=30s
${EXTRA:-}
C
$B/pg_ctl -D $D -l $D.log -w start >/dev/null
P="$B/psql -h /tmp/bpw -p 5497 -d postgres -qAtX"
$B/pgbench -h /tmp/bpw -p 5497 -i -s 50 -q postgres >/dev/null 2>&1
$P -c "checkpoint" -c "select pg_stat_reset_shared('io')"
$B/pgbench -h /tmp/bpw -p 5497 -c 8 -j 2 -T ${T:-60} -M prepared postgres 2>&1 | grep -E "^tps"
$P -c "select pg_stat_force_next_flush()" 
echo "$v: $($P -c "select string_agg(backend_type||'/'||context||' writes='||writes||' bpw='||round(write_bytes/nullif(writes,0)/8192.0,2), '; ') from pg_stat_io where object='relation' and writes>0 and backend_type in ('client backend','background writer','checkpointer')")"
echo "$v: backends+bgwriter bpw=$($P -c "select round(sum(write_bytes)/sum(writes)/8192.0,3) from pg_stat_io where object='relation' and backend_type in ('client backend','background writer')")"
$B/pg_ctl -D $D -w stop >/dev/null
done
