#!/usr/bin/env bash
# Configure (once), build and install one configuration: check | release |
# upstream | upstream-check (see build_config in lib.sh).  Incremental:
# meson/ninja rebuild only what changed, and ccache keeps recompiles cheap
# across trees.
. "$(dirname "$0")/../lib.sh"
as_builder_reexec "$@"
cfg=${1:-check}
build_config "$cfg"

[ -d "$TREE/.git" ] || "$TOP/scripts/build/make-tree.sh"
if [ "$SRC" = "$UPSTREAM_SRC" ]; then
  # A pristine worktree of the upstream tag, so that upstream is built from
  # exactly the same tarball contents as the patched tree.
  if [ ! -e "$UPSTREAM_SRC/.git" ]; then
    git -C "$TREE" worktree prune
    git -C "$TREE" worktree add -q --detach "$UPSTREAM_SRC" "$UPSTREAM_TAG"
  fi
fi

export CCACHE_DIR=${CCACHE_DIR:-$WORK/ccache} CCACHE_BASEDIR=$WORK CCACHE_NOHASHDIR=1
if [ ! -f "$BLD/build.ninja" ]; then
  msg "configuring $cfg build in $BLD"
  rm -rf "$BLD"
  # shellcheck disable=SC2086
  /usr/bin/python3 /usr/bin/meson setup "$BLD" "$SRC" --prefix="$PREFIX" $MESON_OPTS >"$WORK/meson-setup-$cfg.log" 2>&1 ||
    { tail -30 "$WORK/meson-setup-$cfg.log"; die "meson setup failed (log: $WORK/meson-setup-$cfg.log)"; }
fi
# A build directory configured before an option was added (e.g. liburing)
# is brought up to date instead of silently building without it.
if [ "$(cat "$BLD/.series-meson-opts" 2>/dev/null)" != "$MESON_OPTS" ]; then
  # shellcheck disable=SC2086
  /usr/bin/python3 /usr/bin/meson configure "$BLD" $MESON_OPTS >>"$WORK/meson-setup-$cfg.log" 2>&1 ||
    { tail -30 "$WORK/meson-setup-$cfg.log"; die "meson configure failed (log: $WORK/meson-setup-$cfg.log)"; }
  printf '%s' "$MESON_OPTS" >"$BLD/.series-meson-opts"
fi
msg "building $cfg ($BLD)"
ninja -C "$BLD" ${NINJA_JOBS:+-j "$NINJA_JOBS"} >"$WORK/build-$cfg.log" 2>&1 ||
  { grep -E 'error|FAILED' "$WORK/build-$cfg.log" | head -40; die "build failed (log: $WORK/build-$cfg.log)"; }
ninja -C "$BLD" install >"$WORK/install-$cfg.log" 2>&1 || die "install failed (log: $WORK/install-$cfg.log)"
msg "installed $cfg into $PREFIX"
