#!/usr/bin/env bash
# make each-patch: build every patch of the series on its own and run its
# own tests there.
#
#   each-patch.sh [FIRST [LAST]]    (patch numbers, 1-based; default: all)
#
# For each commit of work/postgresql after the upstream tag, in a worktree
# of its own (work/each-patch/src, build in work/each-patch/build, the test
# configuration of scripts/lib.sh), the helper checks the commit out, builds
# it, counts the compiler warnings in the files the commit changes, and runs
# the patch's own tests: the TAP scripts and regression suites whose files
# the commit adds or changes, under every suite that runs them (checkpoint,
# checkpoint_sync, checkpoint_io_uring for src/test/checkpoint).  A patch
# that changes no test file is run against regress and test_aio, the
# existing suites that exercise the buffer manager's I/O.  The report,
# work/each-patch/report.txt, has one line per patch; the exit status is
# non-zero when a patch failed to build or a test failed.  It takes about
# an hour on 2 cores, so .ci/run does not run it.
. "$(dirname "$0")/../lib.sh"
as_builder_reexec "$@"

FIRST=${1:-1}
LAST=${2:-999}
[ -d "$TREE/.git" ] || die "no work tree at $TREE (run: make tree)"
EP=$WORK/each-patch
WT=$EP/src
mkdir -p "$EP"
build_config check
BLD=$EP/build
if [ ! -e "$WT/.git" ]; then
  rm -rf "$WT"
  git -C "$TREE" worktree prune
  git -C "$TREE" worktree add -q --detach "$WT" "$UPSTREAM_TAG"
fi
mapfile -t commits < <(git -C "$TREE" rev-list --reverse "$UPSTREAM_TAG..main")
[ "${#commits[@]}" -gt 0 ] || die "no patches on $UPSTREAM_TAG in $TREE"

# checkpoint's 005_mixed_version.pl runs stock 18.6 from here (check.sh does
# the same)
"$TOP/scripts/build/build.sh" upstream-check
build_config upstream-check
export PG_STOCK_INSTALL=$PREFIX
build_config check
BLD=$EP/build

# One line per patch, "NN  ..."; a run over a range replaces those lines.
report=$EP/report.txt
if [ "$FIRST" = 1 ] && [ "$LAST" = 999 ]; then : >"$report"; else touch "$report"; fi
failed=0
export PG_TEST_TIMEOUT_DEFAULT=${PG_TEST_TIMEOUT_DEFAULT:-360}

# meson test names (project:name, which selects every suite that runs the
# test) of the test files a commit added or changed
tests_for() {
  local c=$1 f base
  local -a names=()
  while read -r f; do
    case $f in
      */t/*.pl)
        base=$(basename "$f" .pl)
        mapfile -t -O "${#names[@]}" names < <(grep -E "/$base\$" "$EP/tests.list" || true)
        ;;
      contrib/pg_checkpoint_stats/sql/*|contrib/pg_checkpoint_stats/expected/*)
        names+=("$(grep -E '^pg_checkpoint_stats/regress$' "$EP/tests.list" || true)")
        ;;
      src/test/modules/test_checkpoint/sql/*|src/test/modules/test_checkpoint/expected/*)
        names+=("$(grep -E '^test_checkpoint/regress$' "$EP/tests.list" || true)")
        ;;
    esac
  done < <(git -C "$TREE" diff --name-only --diff-filter=AM "$c~1" "$c")
  printf '%s\n' "${names[@]}" | sed '/^$/d' | sort -u
}

n=0
for c in "${commits[@]}"; do
  n=$((n + 1))
  [ "$n" -ge "$FIRST" ] && [ "$n" -le "$LAST" ] || continue
  sed -i "/^$(printf %02d "$n")  /d" "$report"
  subj=$(git -C "$TREE" log -1 --format=%s "$c")
  msg "patch $n: $subj"
  git -C "$WT" checkout -q -f --detach "$c"
  git -C "$WT" clean -fdq
  t0=$(date +%s)
  if [ ! -f "$BLD/build.ninja" ]; then
    # shellcheck disable=SC2086
    /usr/bin/python3 /usr/bin/meson setup "$BLD" "$WT" --prefix="$EP/inst" $MESON_OPTS \
      >"$EP/meson-setup.log" 2>&1 || die "meson setup failed (log: $EP/meson-setup.log)"
  fi
  if ! ninja -C "$BLD" >"$EP/build-$n.log" 2>&1; then
    printf '%02d  BUILD FAILED  %s (log: %s)\n' "$n" "$subj" "$EP/build-$n.log" | tee -a "$report"
    failed=1
    continue
  fi
  tb=$(( $(date +%s) - t0 ))
  # warnings in the files this commit changes (the build is incremental)
  changed=$(git -C "$TREE" diff --name-only "$c~1" "$c" -- '*.c' '*.h' | sed 's,.*/,,' | paste -sd'|')
  warn=0
  [ -z "$changed" ] || warn=$(grep -E "($changed):[0-9]+:[0-9]+: warning" "$EP/build-$n.log" | sort -u | wc -l || true)
  # "postgresql:suite / name" -> "name", one line per test
  /usr/bin/python3 /usr/bin/meson test -C "$BLD" --no-rebuild --list 2>/dev/null |
    sed -n 's,^[^:]*:[^/]* / ,,p' | sort -u >"$EP/tests.list"
  mapfile -t setup < <(grep -E '^(tmp_install|install_test_files|initdb_cache)$' "$EP/tests.list")
  mapfile -t names < <(tests_for "$c")
  own=own
  if [ "${#names[@]}" = 0 ]; then
    own=existing
    mapfile -t names < <(grep -E '^(regress/regress|test_aio/.*)$' "$EP/tests.list")
  fi
  t1=$(date +%s)
  set +e
  /usr/bin/python3 /usr/bin/meson test -C "$BLD" --no-rebuild --print-errorlogs \
    --timeout-multiplier "${MESON_TIMEOUT_MULTIPLIER:-3}" \
    "${setup[@]/#/postgresql:}" "${names[@]/#/postgresql:}" \
    >"$EP/test-$n.log" 2>&1
  rc=$?
  set -e
  ok=$(sed -n 's/^Ok: *\([0-9]*\).*/\1/p' "$EP/test-$n.log" | tail -1)
  fl=$(sed -n 's/^Fail: *\([0-9]*\).*/\1/p' "$EP/test-$n.log" | tail -1)
  to=$(sed -n 's/^Timeout: *\([0-9]*\).*/\1/p' "$EP/test-$n.log" | tail -1)
  [ "$rc" = 0 ] || failed=1
  printf '%02d  build %4ss, %s warnings  %s tests (%s): %s ok, %s failed, %4ss  %s\n' \
    "$n" "$tb" "$warn" "$own" "$(printf '%s\n' "${names[@]}" | sed 's,^\([^/]*\)/regress$,\1/regress,; s,^[^/]*/\([^/]*[0-9]_[^/]*\)$,\1,' |
      sort | uniq -c | awk '{print $2 ($1 > 1 ? " x" $1 : "")}' | paste -sd' ')" \
    "${ok:-0}" "$(( ${fl:-0} + ${to:-0} ))" "$(( $(date +%s) - t1 ))" "$subj" | tee -a "$report"
done
git -C "$WT" checkout -q --detach "$UPSTREAM_TAG"
sort -o "$report" "$report"
echo "report: $report"
exit "$failed"
