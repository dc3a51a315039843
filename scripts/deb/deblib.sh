# Sourced by deb.sh (make deb), deb-check.sh (make deb-check) and
# deb-source.sh (make deb-source, the packaging check of .ci/run), and by
# ../build/rebase.sh (make rebase: its private apt configuration), after
# lib.sh: where the packages go, their versions, and the steps that fetch,
# unpack and patch Debian's source package.  Versions come from UPSTREAM.

# The scripts build for the Debian release they run on: this machine's, or
# a chroot's (deb-releases.sh runs them there for the other releases).
# DEB_RELEASE_NUM is the release's major version (12 bookworm, 13 trixie).
DEB_RELEASE=$(. /etc/os-release && echo "${VERSION_CODENAME:?/etc/os-release has no VERSION_CODENAME}")
DEB_RELEASE_NUM=$(. /etc/os-release && v=${VERSION_ID:-}; echo "${v%%.*}")
case $DEB_RELEASE_NUM in
  '' | *[!0-9]*) die "$DEB_RELEASE has no numeric VERSION_ID in /etc/os-release (testing or sid?): build on a stable release";;
esac
DEB_ROOT=$WORK/deb
DEB=$DEB_ROOT/$DEB_RELEASE
SRCPKG=$DEBIAN_SOURCE_PACKAGE
STOCK_DEB_VERSION=$DEBIAN_SOURCE_VERSION
SERIES_TAG=sortedckpt$SERIES_VERSION
# The series' version: 18.6-3+sortedckptN~debR.  "+sortedckptN" sorts above
# the stock packaging and below Debian's next revision or release; "~debR"
# (R = the release's number) tells the builds of one source for two releases
# apart, and sorts the older release's below the newer one's, so that a
# release upgrade moves to the newer release's build (check_versions).
series_deb_version() { echo "$STOCK_DEB_VERSION+$SERIES_TAG~deb$1"; }
SERIES_DEB_VERSION=$(series_deb_version "$DEB_RELEASE_NUM")
# the Labels of make deb's apt repositories (Release files): constant, since
# apt update refuses a repository whose Label changed; an apt pin names the
# series' (DEBIAN.md)
SERIES_LABEL="PostgreSQL sorted-checkpoint series"
STOCK_LABEL="PostgreSQL stock, rebuilt from Debian source"
export DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8
# (deb.sh's builds; add_series records it in the changelog)
export DEB_BUILD_OPTIONS=${DEB_BUILD_OPTIONS-nocheck nodoc parallel=2}
mkdir -p "$DEB"

is_root() { [ "$(id -u)" = 0 ]; }
TIMES=$DEB/times.txt
timed() {  # timed "step name" command...
  local name=$1 t0 rc=0; shift
  t0=$(date +%s)
  "$@" || rc=$?
  printf '%-40s %5d s%s\n' "$name" $(( $(date +%s) - t0 )) "$([ $rc = 0 ] || echo "  (FAILED, exit $rc)")" | tee -a "$TIMES" >&2
  return $rc
}

# apt-get install what is missing (root), or print the command and fail
need_pkgs() {
  local missing="" p st
  for p in "$@"; do
    st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    [ "$st" = "install ok installed" ] || missing="$missing $p"
  done
  [ -z "$missing" ] && return 0
  is_root || die "missing Debian packages; install them with: sudo apt-get install$missing"
  msg "installing:$missing"
  apt_updated
  # shellcheck disable=SC2086
  apt-get install -y -q --no-install-recommends $missing >> "$DEB/apt-install.log" 2>&1 ||
    { tail -20 "$DEB/apt-install.log" >&2; die "apt-get install failed"; }
}
APT_UPDATED=
apt_updated() { [ -n "$APT_UPDATED" ] || { apt-get update -qq 2>&1 | grep -v '^N: ' >&2 || true; APT_UPDATED=1; }; }

SRC=$DEB/src
A=$DEB/apt
APT_OPTS=(-q -o "Dir::Etc::SourceList=$A/sources.list" -o Dir::Etc::SourceParts=/dev/null
  -o "Dir::State::Lists=$A/lists" -o "Dir::State::status=$A/status"
  -o "Dir::Cache=$A/cache" -o Debug::NoLocking=1 -o APT::Sandbox::User="$(id -un)")
papt() { apt-get "${APT_OPTS[@]}" "$@"; }
pcache() { apt-cache "${APT_OPTS[@]}" "$@"; }

# postgresql-18's source package (DEBIAN_SOURCE_VERSION) from Debian's archive
# into $SRC, its orig tarball checked against UPSTREAM's sha256
fetch_pg_source() {
  mkdir -p "$A/lists/partial" "$A/cache/archives/partial" "$SRC"
  echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $DEBIAN_SUITE main" \
    > "$A/sources.list"
  : > "$A/status"
  papt update > "$A/update.log" 2>&1 || { cat "$A/update.log" >&2; die "apt-get update (private, $DEBIAN_SUITE sources) failed"; }
  local dsc=$SRC/${SRCPKG}_$STOCK_DEB_VERSION.dsc
  # the tarball make tree fetched (same sha256): apt does not download it again
  if [ ! -f "$SRC/$ORIG_TARBALL" ] && [ -f "$WORK/src/$ORIG_TARBALL" ]; then
    cp "$WORK/src/$ORIG_TARBALL" "$SRC/"
  fi
  if [ ! -f "$dsc" ]; then
    (cd "$SRC" && papt source --download-only "$SRCPKG=$STOCK_DEB_VERSION") > "$A/source.log" 2>&1 || {
      cat "$A/source.log" >&2
      die "Debian's archive ($DEBIAN_SUITE) does not provide $SRCPKG $STOCK_DEB_VERSION (available: $(pcache showsrc "$SRCPKG" | sed -n 's/^Version: //p' | tr '\n' ' ')); UPSTREAM's DEBIAN_SOURCE_VERSION must be one of them"
    }
  fi
  [ "$(sha256sum "$SRC/$ORIG_TARBALL" | cut -d' ' -f1)" = "$ORIG_SHA256" ] ||
    die "$SRC/$ORIG_TARBALL does not match the sha256 pinned in UPSTREAM"
}

# unpack DIR [dpkg-source options]: $DEB/build/DIR/postgresql-18-18.6,
# Debian's patches applied (unless --skip-patches)
unpack() {
  local b=$DEB/build/$1; shift
  rm -rf "$b"; mkdir -p "$b"
  if is_root; then chown "$BUILDER": "$b"; fi
  as_builder dpkg-source "$@" -x "$SRC/${SRCPKG}_$STOCK_DEB_VERSION.dsc" "$b/$SRCPKG-$PG_VERSION" > "$b/unpack.log" 2>&1 ||
    { cat "$b/unpack.log" >&2; die "dpkg-source -x failed"; }
  # (dpkg-source -x links the orig tarball beside the unpacked tree)
  [ -e "$b/$ORIG_TARBALL" ] || as_builder ln -s "$SRC/$ORIG_TARBALL" "$b/$ORIG_TARBALL"
}

# add the series to the unpacked source in $1 (generated, never kept in git)
add_series() {
  local s=$1 p n=0 subjects=""
  local pd=$s/debian/patches/sorted-checkpoint
  as_builder mkdir -p "$pd"
  for p in "$TOP"/patches/*.patch; do
    as_builder cp "$p" "$pd/"
    echo "sorted-checkpoint/$(basename "$p")" | as_builder tee -a "$s/debian/patches/series" >/dev/null
    # the Subject: header, with its continuation lines, wrapped for the changelog
    subjects="$subjects$(awk '/^Subject: /{s=$0; f=1; next} f && /^[ \t]/{s=s $0; next} f{exit} END{sub(/^Subject: *(\[[^]]*\] *)?/, "", s); gsub(/[ \t]+/, " ", s); print s}' "$p" |
      fold -s -w 70 | sed '1s/^/    - /; 1!s/^/      /; s/ *$//')"$'\n'
    n=$((n + 1))
  done
  [ "$n" -gt 0 ] || die "no patches in $TOP/patches"
  local who="${DEBFULLNAME:-Sorted checkpoint series build} <${DEBEMAIL:-$(id -un)@$(hostname)}>"
  {
    echo "$SRCPKG ($SERIES_DEB_VERSION) $(dpkg-parsechangelog -l "$s/debian/changelog" -S Distribution); urgency=medium"
    echo
    echo "  * Add the sorted-checkpoint patch series, version $SERIES_VERSION ($n patches,"
    echo "    debian/patches/sorted-checkpoint/), generated by make deb:"
    printf '%s' "$subjects"
    echo "  * Built on $(. /etc/os-release; echo "$PRETTY_NAME"),"
    echo "    DEB_BUILD_OPTIONS=\"$DEB_BUILD_OPTIONS\"."
    echo
    echo " -- $who  $(date -R)"
    echo
    cat "$s/debian/changelog"
  } > "$DEB/changelog.new"
  as_builder cp "$DEB/changelog.new" "$s/debian/changelog"
  rm -f "$DEB/changelog.new"
}

# check_versions VERSION: the series' package version sorts
#  - above the stock packaging it is built from, and above the PostgreSQL apt
#    repository's build of the same release for this Debian release
#    (18.6-1.pgdgR+1): apt installs it over either;
#  - below Debian's next revision and next minor release, and the apt
#    repository's next minor release: they replace it, unless held (DEBIAN.md);
#  - above the previous series on any release, and between the same series'
#    builds for the previous and the next Debian release (a release upgrade
#    moves to the newer release's build).
# Prints what it compared; returns 1 if any comparison fails.
check_versions() {
  local v=$1 rev=${STOCK_DEB_VERSION##*-} minor=${PG_VERSION#*.} next_rev next_minor r=$DEB_RELEASE_NUM
  next_rev=${STOCK_DEB_VERSION%-*}-$(( ${rev%%[!0-9]*} + 1 ))
  next_minor=$PG_MAJOR.$(( ${minor%%[!0-9]*} + 1 ))
  local ok=0
  cmp_v() {
    if dpkg --compare-versions "$1" "$2" "$3"; then echo "  $1 $2 $3: yes"; else echo "  $1 $2 $3: NO"; ok=1; fi
  }
  cmp_v "$v" gt "$STOCK_DEB_VERSION"
  cmp_v "$v" gt "$PG_VERSION-1.pgdg$r+1"
  cmp_v "$v" lt "$next_rev"
  cmp_v "$v" lt "$next_minor-1"
  cmp_v "$v" lt "$next_minor-1.pgdg$r+1"
  cmp_v "$v" gt "$STOCK_DEB_VERSION+sortedckpt$((SERIES_VERSION - 1))"
  cmp_v "$v" gt "$STOCK_DEB_VERSION+sortedckpt$((SERIES_VERSION - 1))~deb$((r + 1))"
  cmp_v "$v" gt "$(series_deb_version $((r - 1)))"
  cmp_v "$v" lt "$(series_deb_version $((r + 1)))"
  return $ok
}
