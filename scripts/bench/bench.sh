#!/usr/bin/env bash
# `make bench`, `make bench-spread`, `make bench-walpeak`, `make bench-ddl` and
# `make bench-volume`: build
# unpatched upstream and the patched release build from the same tarball,
# then run on both the immediate-checkpoint benchmark (bench_immediate.py),
# the append-heavy pgbench p99 benchmark (bench_append.py), the
# FlushBuffer-heavy pgbench benchmark (bench_flush.py) and the cleanup-lock
# benchmark (bench_cleanup.py: a VACUUM (FREEZE) loop beside pgbench under
# spread checkpoints, BufferPin waits sampled); BENCH_SCENARIOS selects
# among "all random" (bench_immediate.py), "append" (bench_append.py), "flush"
# (bench_flush.py) and "cleanup" (bench_cleanup.py).  A benchmark that
# fails does not keep the others from running; the script then exits with
# its status.
# With --spread: the spread-checkpoint pacing benchmark (bench_spread.py).
# With --walpeak: the peak size of pg_wal when WAL comes fast (bench_walpeak.py).
# With --volume: pgbench and COPY/VACUUM on a throttled loop device
# (bench_volume.py); as root, bench_volume.py itself runs as root: it sets
# the volume up (losetup, mkfs, mount, blkio throttling), runs the benchmark
# as the build user and tears the volume down.
# With --ddl: pgbench beside TRUNCATE and CREATE/DROP loops (bench_ddl.py); as
# root, bench_ddl.py runs as root to count the server's openat() calls with
# perf, and runs the benchmark itself as the build user.
# BENCH_BUILD=no: no build, the installations as they are (both must exist).
. "$(dirname "$0")/../lib.sh"

build_both() {
  if [ "${BENCH_BUILD:-yes}" = no ]; then
    for p in inst-release inst-upstream; do
      [ -x "$WORK/$p/bin/pg_ctl" ] || die "BENCH_BUILD=no, but $WORK/$p is not installed"
    done
    msg "BENCH_BUILD=no: $WORK/inst-release and $WORK/inst-upstream as they are"
    return
  fi
  "$TOP/scripts/build/build.sh" release
  "$TOP/scripts/build/build.sh" upstream
}

if [ "${1:-}" = "--volume" ] || [ "${1:-}" = "--ddl" ]; then
  what=$1
  shift
  if [ "$(id -u)" = 0 ]; then
    ensure_builder
    mkdir -p "$WORK"
    chown "$BUILDER": "$WORK"
    runuser -u "$BUILDER" -- test -r "$TOP/UPSTREAM" ||
      die "user $BUILDER cannot read $TOP; make its parent directories world-searchable (chmod o+x) or clone elsewhere"
  fi
  build_both        # build.sh runs as the build user
  export WORK PG_BUILDER="$BUILDER"
  exec /usr/bin/python3 "$TOP/scripts/bench/bench_${what#--}.py" "$@"
fi
as_builder_reexec "$@"
build_both
export WORK
if [ "${1:-}" = "--spread" ]; then
  shift
  exec /usr/bin/python3 "$TOP/scripts/bench/bench_spread.py" "$@"
fi
if [ "${1:-}" = "--walpeak" ]; then
  shift
  exec /usr/bin/python3 "$TOP/scripts/bench/bench_walpeak.py" "$@"
fi
rc=0
/usr/bin/python3 "$TOP/scripts/bench/bench_immediate.py" "$@" || rc=$?
/usr/bin/python3 "$TOP/scripts/bench/bench_append.py" || rc=$?
/usr/bin/python3 "$TOP/scripts/bench/bench_flush.py" || rc=$?
/usr/bin/python3 "$TOP/scripts/bench/bench_cleanup.py" || rc=$?
exit $rc
