#!/usr/bin/env bash
# Build unpatched upstream and the patched release build from the same
# tarball, then run the immediate-checkpoint benchmark on both (bench.py).
. "$(dirname "$0")/lib.sh"
as_builder_reexec "$@"
"$TOP/scripts/build.sh" release
"$TOP/scripts/build.sh" upstream
export WORK
exec /usr/bin/python3 "$TOP/scripts/bench.py" "$@"
