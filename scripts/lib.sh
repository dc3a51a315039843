# Sourced by the scripts in the folders beside it (build/, test/, bench/,
# deb/, demo/; scripts/README).  Paths, the pinned upstream version, and the
# rule that everything that builds or runs PostgreSQL runs as an
# unprivileged user: initdb and the TAP harness refuse to run as root.
set -euo pipefail

TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=../UPSTREAM
. "$TOP/UPSTREAM"
PG_MAJOR=${PG_VERSION%%.*}
DEBIAN_SOURCE_PACKAGE=postgresql-$PG_MAJOR
ORIG_TARBALL=${DEBIAN_SOURCE_PACKAGE}_$PG_VERSION.orig.tar.bz2
[ "$PG_VERSION" = "${DEBIAN_SOURCE_VERSION%-*}" ] ||
  { echo "ERROR: UPSTREAM: DEBIAN_SOURCE_VERSION=$DEBIAN_SOURCE_VERSION is not a packaging of PG_VERSION=$PG_VERSION" >&2; exit 1; }
WORK=${WORK:-$TOP/work}
TREE=$WORK/postgresql            # upstream + one commit per patch
UPSTREAM_SRC=$WORK/upstream-src  # pristine worktree at the upstream tag
UPSTREAM_TAG=upstream/$PG_VERSION
BUILDER=${PG_BUILDER:-pgbuild}
# meson must run under a python3 the build user can read (not root's pyenv)
export PATH=/usr/lib/ccache:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

msg() { printf '==> %s\n' "$*" >&2; }
die() { printf 'ERROR: %s\n' "$*" >&2; exit 1; }

# Build and install configurations: name -> source dir, build dir, prefix,
# meson options.  "check" is what the tests use (assertions, TAP, injection
# points); "release" is the optimized patched build for the demo and the
# benchmarks; "upstream" is unpatched 18.6 with the same options as
# "release", for side-by-side comparisons; "upstream-check" is unpatched 18.6
# with exactly the options of "check": the baseline for the ABI check
# (scripts/test/abi.sh compares debug info built the same way) and the stock
# server that mixed-version TAP tests run (PG_STOCK_INSTALL, see check.sh).
build_config() {
  case "$1" in
    check|upstream-check)
      if [ "$1" = check ]; then
        SRC=$TREE; BLD=$WORK/build; PREFIX=$WORK/inst
      else
        SRC=$UPSTREAM_SRC; BLD=$WORK/build-upstream-check; PREFIX=$WORK/inst-upstream-check
      fi
      MESON_OPTS="-Dbuildtype=debugoptimized -Dcassert=true -Dtap_tests=enabled -Dinjection_points=true"
      ;;
    release)
      SRC=$TREE; BLD=$WORK/build-release; PREFIX=$WORK/inst-release
      MESON_OPTS="-Dbuildtype=release -Dtap_tests=disabled"
      ;;
    upstream)
      SRC=$UPSTREAM_SRC; BLD=$WORK/build-upstream; PREFIX=$WORK/inst-upstream
      MESON_OPTS="-Dbuildtype=release -Dtap_tests=disabled"
      ;;
    prev)
      # an earlier revision of the series, for benchmarks (build-prev.sh)
      SRC=$WORK/prev-src; BLD=$WORK/build-prev; PREFIX=$WORK/inst-prev
      MESON_OPTS="-Dbuildtype=release -Dtap_tests=disabled"
      ;;
    *) die "unknown build configuration '$1' (check, release, upstream, upstream-check, prev)";;
  esac
  MESON_OPTS="$MESON_OPTS -Dicu=enabled -Dlz4=enabled -Dzstd=enabled -Dreadline=enabled -Dssl=none -Dnls=disabled -Dplperl=disabled -Dplpython=disabled -Dpltcl=disabled -Ddocs=disabled -Dllvm=disabled -Dliburing=enabled"
}

ensure_builder() {
  if ! id "$BUILDER" >/dev/null 2>&1; then
    msg "creating unprivileged build user '$BUILDER'"
    useradd --create-home --shell /bin/bash "$BUILDER"
  fi
}

# When run as root, re-run the calling script as the build user, owning
# $WORK.  Call as: as_builder_reexec "$@"
as_builder_reexec() {
  [ "$(id -u)" = 0 ] || return 0
  ensure_builder
  mkdir -p "$WORK"
  chown "$BUILDER": "$WORK"
  if ! runuser -u "$BUILDER" -- test -r "$TOP/UPSTREAM"; then
    die "user $BUILDER cannot read $TOP; make its parent directories world-searchable (chmod o+x) or clone elsewhere"
  fi
  exec runuser -u "$BUILDER" -- env PATH="$PATH" WORK="$WORK" bash "$0" "$@"
}

# Run one command as the build user (or as ourselves when not root).
as_builder() {
  if [ "$(id -u)" = 0 ]; then
    ensure_builder
    runuser -u "$BUILDER" -- env PATH="$PATH" "$@"
  else
    "$@"
  fi
}
