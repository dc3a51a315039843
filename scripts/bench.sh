#!/usr/bin/env bash
# Build unpatched upstream and the patched release build from the same
# tarball, then run the immediate-checkpoint benchmark on both (bench.py),
# or with --spread the spread-checkpoint pacing benchmark (bench_spread.py).
. "$(dirname "$0")/lib.sh"
as_builder_reexec "$@"
"$TOP/scripts/build.sh" release
"$TOP/scripts/build.sh" upstream
export WORK
if [ "${1:-}" = "--spread" ]; then
  shift
  exec /usr/bin/python3 "$TOP/scripts/bench_spread.py" "$@"
fi
exec /usr/bin/python3 "$TOP/scripts/bench.py" "$@"
