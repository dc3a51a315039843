#!/usr/bin/env bash
# Build the test configuration (assertions, TAP, injection points) and the
# same configuration of stock 18.6 (upstream-check), check that the patched
# server keeps stock 18.6's ABI (scripts/test/abi.sh) and that the series
# is pgindent-clean (scripts/build/pgindent.sh --check), and run the
# upstream suites this series touches plus the series' own suite.  Exit
# status is non-zero on any failure, the ABI check included.  Extra
# arguments go to meson test (e.g. scripts/test/check.sh --suite
# checkpoint).
. "$(dirname "$0")/../lib.sh"
as_builder_reexec "$@"

"$TOP/scripts/build/build.sh" check
"$TOP/scripts/build/build.sh" upstream-check
build_config upstream-check
# Mixed-version TAP tests run the stock 18.6 server from here.
export PG_STOCK_INSTALL=$PREFIX
build_config check

# The ABI check runs before the tests, which run even when it fails (so that
# one run reports both); its result counts in the exit status.
abi_rc=0
"$TOP/scripts/test/abi.sh" --no-build || abi_rc=$?

# pgindent is a gate too: the series' C files must be as pgindent leaves
# them, and typedefs.list must know the typedefs they declare (make indent).
indent_rc=0
bash "$TOP/scripts/build/pgindent.sh" --check || indent_rc=$?

SUITES="setup regress recovery pg_buffercache pg_prewarm test_aio injection_points checkpoint checkpoint_sync checkpoint_io_uring test_checkpoint pg_checkpoint_stats"
args=()
if [ $# -gt 0 ]; then
  args=(--suite setup "$@")
else
  for s in $SUITES; do args+=(--suite "$s"); done
fi

# The documentation must be valid DocBook (xmllint --valid against the DTD
# from Debian's docbook-xml, no network).
msg "validating the documentation (xmllint)"
ninja -C "$BLD" doc/src/sgml/postgres-full.xml >"$WORK/docs-check.log" 2>&1 ||
  { tail -30 "$WORK/docs-check.log"; die "documentation does not validate (log: $WORK/docs-check.log)"; }

# TAP tests and pg_regress refuse to run as root; we are the build user here.
export PG_TEST_TIMEOUT_DEFAULT=${PG_TEST_TIMEOUT_DEFAULT:-360}
start=$(date +%s)
set +e
/usr/bin/python3 /usr/bin/meson test -C "$BLD" --print-errorlogs --no-rebuild \
  --timeout-multiplier "${MESON_TIMEOUT_MULTIPLIER:-3}" "${args[@]}" 2>&1 | tee "$WORK/check.log"
rc=${PIPESTATUS[0]}
set -e
ok=$(sed -n 's/^Ok: *\([0-9]*\).*/\1/p' "$WORK/check.log" | tail -1)
fail=$(sed -n 's/^Fail: *\([0-9]*\).*/\1/p' "$WORK/check.log" | tail -1)
timeout=$(sed -n 's/^Timeout: *\([0-9]*\).*/\1/p' "$WORK/check.log" | tail -1)
skipped=$(sed -n 's/^Skipped: *\([0-9]*\).*/\1/p' "$WORK/check.log" | tail -1)
[ "$abi_rc" = 0 ] || echo "ABI check failed (report: $WORK/abi/abidiff.txt)"
[ "$indent_rc" = 0 ] || echo "pgindent check failed (diff: $WORK/pgindent.diff; run: make indent)"
echo "check took $(( $(date +%s) - start )) s; logs under $BLD/meson-logs and $BLD/testrun"
echo "meson: ${ok:-0} passed, $(( ${fail:-0} + ${timeout:-0} )) failed, ${skipped:-0} skipped"
if [ "$rc" != 0 ] && [ $(( ${fail:-0} + ${timeout:-0} )) = 0 ]; then
  echo "meson test exited with $rc"
fi
[ "$rc" != 0 ] || rc=$abi_rc
[ "$rc" != 0 ] || rc=$indent_rc
exit "$rc"
