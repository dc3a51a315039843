#!/usr/bin/env bash
# `make bench`, `make bench-spread` and `make bench-walpeak`: build
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
. "$(dirname "$0")/lib.sh"
as_builder_reexec "$@"
"$TOP/scripts/build.sh" release
"$TOP/scripts/build.sh" upstream
export WORK
if [ "${1:-}" = "--spread" ]; then
  shift
  exec /usr/bin/python3 "$TOP/scripts/bench_spread.py" "$@"
fi
if [ "${1:-}" = "--walpeak" ]; then
  shift
  exec /usr/bin/python3 "$TOP/scripts/bench_walpeak.py" "$@"
fi
rc=0
/usr/bin/python3 "$TOP/scripts/bench_immediate.py" "$@" || rc=$?
/usr/bin/python3 "$TOP/scripts/bench_append.py" || rc=$?
/usr/bin/python3 "$TOP/scripts/bench_flush.py" || rc=$?
/usr/bin/python3 "$TOP/scripts/bench_cleanup.py" || rc=$?
exit $rc
