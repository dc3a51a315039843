#!/usr/bin/env bash
# Obtain the pinned upstream tarball into $WORK/src and verify its sha256.
# Order: $PG_SOURCE_TARBALL if set; Debian's archive through a private apt
# configuration (the system's apt setup is not touched, no root needed);
# the fallback copy in ../shared/upstream/ if the archive no longer has it.
. "$(dirname "$0")/../lib.sh"
as_builder_reexec "$@"

dest=$WORK/src/$ORIG_TARBALL
mkdir -p "$WORK/src"

verify() {
  local got
  got=$(sha256sum "$1" | cut -d' ' -f1)
  [ "$got" = "$ORIG_SHA256" ] || {
    echo "ERROR: sha256 mismatch for $1" >&2
    echo "  expected $ORIG_SHA256" >&2
    echo "  got      $got" >&2
    return 1
  }
}

if [ -f "$dest" ] && verify "$dest" 2>/dev/null; then
  exit 0
fi
rm -f "$dest"

if [ -n "${PG_SOURCE_TARBALL:-}" ]; then
  [ -f "$PG_SOURCE_TARBALL" ] || die "PG_SOURCE_TARBALL=$PG_SOURCE_TARBALL does not exist"
  verify "$PG_SOURCE_TARBALL" || die "PG_SOURCE_TARBALL is not the pinned $ORIG_TARBALL"
  cp "$PG_SOURCE_TARBALL" "$dest"
  msg "using PG_SOURCE_TARBALL=$PG_SOURCE_TARBALL"
  exit 0
fi

apt_dir=$WORK/apt
rm -rf "$apt_dir"
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/dl"
echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $DEBIAN_SUITE main" \
  > "$apt_dir/sources.list"
: > "$apt_dir/status"
APT_OPTS=(-q -o "Dir::Etc::SourceList=$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
  -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::State::status=$apt_dir/status"
  -o "Dir::Cache=$apt_dir/cache" -o Debug::NoLocking=1 -o APT::Sandbox::User="$(id -un)")

msg "downloading $ORIG_TARBALL from Debian's archive ($DEBIAN_SOURCE_PACKAGE, $DEBIAN_SUITE)"
if apt-get "${APT_OPTS[@]}" update >"$apt_dir/log" 2>&1 &&
   (cd "$apt_dir/dl" && apt-get "${APT_OPTS[@]}" source --download-only "$DEBIAN_SOURCE_PACKAGE") >>"$apt_dir/log" 2>&1 &&
   [ -f "$apt_dir/dl/$ORIG_TARBALL" ]; then
  verify "$apt_dir/dl/$ORIG_TARBALL" || die "the archive's $ORIG_TARBALL does not match the pinned sha256"
  mv "$apt_dir/dl/$ORIG_TARBALL" "$dest"
  exit 0
fi

fallback=$TOP/../shared/upstream/$ORIG_TARBALL
if [ -f "$fallback" ]; then
  echo "NOTE: Debian's archive did not provide $ORIG_TARBALL (see $apt_dir/log);" >&2
  echo "      using the fallback copy $fallback" >&2
  verify "$fallback" || die "the fallback copy does not match the pinned sha256"
  cp "$fallback" "$dest"
  exit 0
fi
die "could not obtain $ORIG_TARBALL: not in Debian's archive (log: $apt_dir/log), no fallback copy; set PG_SOURCE_TARBALL=/path/to/$ORIG_TARBALL"
