#!/usr/bin/env bash
# Build an earlier revision of the series, for benchmarks that compare it
# with the current one in the same run (BENCH_PREV_INSTALL, see README.md):
#   bash scripts/build/build-prev.sh REV
# applies patches/ as of REV, a revision of this repository, to the pinned
# upstream release in $WORK/prev-src and installs the optimized build (the
# options of "release") into $WORK/inst-prev.
. "$(dirname "$0")/../lib.sh"
as_builder_reexec "$@"
rev=${1:?usage: build-prev.sh REV (a revision of this repository)}
build_config prev
[ -d "$TREE/.git" ] || "$TOP/scripts/build/make-tree.sh"
tmp=$(mktemp -d)
git -c safe.directory="$TOP" -C "$TOP" archive "$rev" patches | tar -x -C "$tmp" ||
  die "no patches/ at $rev"
git -C "$TREE" worktree remove --force "$SRC" 2>/dev/null || rm -rf "$SRC"
git -C "$TREE" worktree prune
git -C "$TREE" worktree add -q --detach "$SRC" "$UPSTREAM_TAG"
git -C "$SRC" -c user.name=prev -c user.email=prev@localhost am -q --3way "$tmp"/patches/*.patch ||
  die "patches/ of $rev do not apply on $UPSTREAM_TAG"
rm -rf "$tmp"
msg "$SRC: $UPSTREAM_TAG + patches/ of $rev ($(git -C "$SRC" rev-list --count "$UPSTREAM_TAG"..HEAD) commits)"
exec "$TOP/scripts/build/build.sh" prev
