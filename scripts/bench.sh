#!/usr/bin/env bash
# Build unpatched upstream and the patched release build from the same
# tarball, then run on both the immediate-checkpoint benchmark (bench.py) and
# the append-heavy pgbench p99 benchmark (bench_append.py); BENCH_SCENARIOS
# selects among "all random" (bench.py) and "append" (bench_append.py).
# With --spread: the spread-checkpoint pacing benchmark (bench_spread.py).
. "$(dirname "$0")/lib.sh"
as_builder_reexec "$@"
"$TOP/scripts/build.sh" release
"$TOP/scripts/build.sh" upstream
export WORK
if [ "${1:-}" = "--spread" ]; then
  shift
  exec /usr/bin/python3 "$TOP/scripts/bench_spread.py" "$@"
fi
/usr/bin/python3 "$TOP/scripts/bench.py" "$@"
exec /usr/bin/python3 "$TOP/scripts/bench_append.py"
