#!/usr/bin/env bash
# make deb, for the Debian release this runs on (deb-releases.sh runs it on
# this machine and in a chroot of each other release): Debian packages of the
# series, built from Debian's own postgresql-18 source package.
#
#   work/deb/RELEASE/ (bookworm, trixie)
#     repo/     the series' packages: postgresql-18, postgresql-client-18,
#               libpq5, -jit, PL/Perl, PL/Python, PL/Tcl, the -dev and
#               -dbgsym packages, version 18.6-3+sortedckptN~debR
#               (N = SERIES_VERSION in UPSTREAM, R = the release's number,
#               deblib.sh), postgresql-common where the release's is too old
#               (step 2), and the series' source package (.dsc); a flat apt
#               repository (Packages, Sources, Release):
#                 deb [trusted=yes] file:/path/to/work/deb/RELEASE/repo ./
#     stock/    the same source without the series (version 18.6-3,
#               unchanged), with the same postgresql-common: what the
#               install test (make deb-check) starts from and rolls back to
#     build/    unpacked sources and build logs
#     times.txt how long each step took
#
# What it does:
#  1. Downloads Debian's postgresql-18 source package (DEBIAN_SOURCE_VERSION
#     in UPSTREAM, 18.6-3: the one whose orig tarball UPSTREAM pins; the
#     tarball's sha256 is checked against UPSTREAM) from Debian's archive,
#     suite DEBIAN_SUITE (sid), through a private apt configuration in
#     work/deb/RELEASE/apt (the system's apt setup is not touched; apt checks
#     every file against the signed Sources index).
#  2. postgresql-common.  postgresql-18 needs postgresql-common >= 275, and
#     its build includes postgresql-common-dev's postgresql.mk.
#     - Debian 13 has 278: the release's own postgresql-common-dev is
#       installed, and the packages do not replace the release's
#       postgresql-common.
#     - Debian 12 has 248: sid's current postgresql-common is downloaded
#       (checked against the signed index), built, shipped in repo/ and
#       stock/, and installed on the build machine (postgresql-common-dev,
#       with postgresql-common and postgresql-client-common, which its Breaks
#       require to be >= 269): the one change `make deb` makes to the
#       system's packages besides build dependencies.  This is what the
#       PostgreSQL apt repository does for Debian 12.  README.md, "Debian
#       packages", says what this changes on a server.
#  3. Installs postgresql-18's build dependencies from the release's archive
#     (`apt-get build-dep` on the unpacked source).  The release has them
#     all: llvm-dev and clang are unversioned in Build-Depends, so JIT is
#     built with the release's LLVM (14 on Debian 12, 19 on Debian 13;
#     PostgreSQL 18 supports 14 and later), as apt.postgresql.org does.
#     tzdata-legacy (not in Debian 12) is a test-only build dependency
#     (<!nocheck>): with DEB_BUILD_OPTIONS=nocheck the nocheck build profile
#     is set too, so it is not needed.
#  4. Builds the stock packages: Debian's source, unchanged.
#  5. Builds the series' packages: the same source, patches/*.patch (as they
#     are now) copied into debian/patches/sorted-checkpoint/ and appended to
#     debian/patches/series, a debian/changelog entry for version
#     18.6-3+sortedckptN~debR.  Debian's build passes
#     --with-extra-version=" (Debian <version>)" to configure, so
#     SELECT version() says "PostgreSQL 18.6 (Debian 18.6-3+sortedckptN~debR) ...".
#     Configure options are Debian's (postgresql-common's server/postgresql.mk):
#     JIT/LLVM, PL/Perl, PL/Python, PL/Tcl, ICU, LZ4, zstd, liburing, ...
#  6. Writes the apt indexes of repo/ and stock/.
#
# DEB_BUILD_OPTIONS defaults to "nocheck nodoc parallel=2"; set it to build
# differently (without nocheck the build runs PostgreSQL's check-world, which
# needs tzdata-legacy, i.e. Debian 13).  The builds run as the unprivileged
# user pgbuild (as root), under nice/ionice.  A build is skipped when its
# packages exist and its inputs (patches, options, versions) have not
# changed; DEB_REBUILD=1 forces it.  DEB_FLAVOURS="series" builds the series
# alone (default "stock series").
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/deblib.sh"
PGCOMMON_MIN=275
profiles=""
for o in nocheck nodoc; do
  case " $DEB_BUILD_OPTIONS " in *" $o "*) profiles="$profiles${profiles:+,}$o";; esac
done
export DEB_BUILD_PROFILES=${DEB_BUILD_PROFILES-${profiles//,/ }}
NICE=(nice -n 19 ionice -c3)
echo "--- make deb $(date -u '+%F %T') UTC, $DEB_RELEASE, DEB_BUILD_OPTIONS='$DEB_BUILD_OPTIONS'" >> "$TIMES"
if is_root; then
  ensure_builder
  chown -R "$BUILDER": "$DEB"
  runuser -u "$BUILDER" -- test -r "$TOP/UPSTREAM" ||
    die "user $BUILDER cannot read $TOP; make its parent directories world-searchable (chmod o+x)"
fi

need_pkgs build-essential dpkg-dev fakeroot apt-utils xz-utils bzip2 ca-certificates

# ---------------------------------------------------------------- 1. sources
timed "fetch postgresql-18 source ($DEBIAN_SUITE)" fetch_pg_source

# ------------------------------------------------------ 2. postgresql-common
# the release's own, when new enough (apt-cache madison: the archive's
# versions, not what this machine has installed)
if is_root; then apt_updated; fi
PGC_RELEASE=$(apt-cache madison postgresql-common-dev 2>/dev/null | awk -F' *[|] *' '{print $2}' | sort -V | tail -1)
if [ -n "${DEB_PGCOMMON_VERSION:-}" ] || [ -z "$PGC_RELEASE" ] || dpkg --compare-versions "$PGC_RELEASE" lt "$PGCOMMON_MIN"; then
  PGC_BUILD=1
else
  PGC_BUILD=
  PGC_VERSION=$PGC_RELEASE
fi
fetch_common() {
  # the newest in the suite, at least $PGCOMMON_MIN
  PGC_VERSION=${DEB_PGCOMMON_VERSION:-$(pcache showsrc postgresql-common | sed -n 's/^Version: //p' | sort -V | tail -1)}
  [ -n "$PGC_VERSION" ] || die "no postgresql-common source in $DEBIAN_SUITE"
  dpkg --compare-versions "$PGC_VERSION" ge "$PGCOMMON_MIN" ||
    die "postgresql-common $PGC_VERSION in $DEBIAN_SUITE is older than $PGCOMMON_MIN"
  local tar=$SRC/postgresql-common_$PGC_VERSION.tar.xz
  if [ ! -f "$tar" ]; then
    # postgresql-common is a native package: its .tar.xz is the whole source,
    # debian/ included.  The archive has been seen to answer 404 for the .dsc
    # while serving the tarball; apt checks the tarball against the signed
    # Sources index either way, which is all the build needs.
    (cd "$SRC" && papt source --download-only "postgresql-common=$PGC_VERSION") > "$A/source-common.log" 2>&1 || true
    [ -f "$tar" ] || { cat "$A/source-common.log" >&2; die "could not download postgresql-common $PGC_VERSION"; }
  fi
  local want
  want=$(pcache showsrc postgresql-common | awk -v f="postgresql-common_$PGC_VERSION.tar.xz" '/^Checksums-Sha256:/{c=1;next} /^[^ ]/{c=0} c && $3 == f {print $1; exit}')
  [ -n "$want" ] || die "postgresql-common $PGC_VERSION is not in the archive's Sources index"
  [ "$(sha256sum "$tar" | cut -d' ' -f1)" = "$want" ] ||
    die "$tar does not match the archive's Sources index"
}
CB=$DEB/build/common
common_debs() {
  [ -n "$PGC_BUILD" ] || return 0
  ls "$CB"/postgresql-common_"$PGC_VERSION"_all.deb "$CB"/postgresql-client-common_"$PGC_VERSION"_all.deb "$CB"/postgresql-common-dev_"$PGC_VERSION"_all.deb 2>/dev/null
}
build_common() {
  need_pkgs debhelper
  rm -rf "$CB"; mkdir -p "$CB"
  if is_root; then chown "$BUILDER": "$CB"; fi
  as_builder tar -C "$CB" -xf "$SRC/postgresql-common_$PGC_VERSION.tar.xz"
  local d
  d=$(find "$CB" -mindepth 1 -maxdepth 1 -type d | head -1)
  [ "$d" = "$CB/postgresql-common-$PGC_VERSION" ] || as_builder mv "$d" "$CB/postgresql-common-$PGC_VERSION"
  (cd "$CB/postgresql-common-$PGC_VERSION" &&
    as_builder env DEB_BUILD_OPTIONS="$DEB_BUILD_OPTIONS" DEB_BUILD_PROFILES="$DEB_BUILD_PROFILES" \
      "${NICE[@]}" dpkg-buildpackage -us -uc -b) > "$CB/build.log" 2>&1 ||
    { tail -40 "$CB/build.log" >&2; die "postgresql-common build failed (log: $CB/build.log)"; }
}
# postgresql-18's debian/rules includes postgresql-common-dev's postgresql.mk
install_common_dev() {
  is_root || die "postgresql-common-dev >= $PGCOMMON_MIN is needed to build; as root: apt-get install $(common_debs | tr '\n' ' ')"
  apt_updated
  # shellcheck disable=SC2046
  apt-get install -y -q --no-install-recommends $(common_debs) >> "$DEB/apt-install.log" 2>&1 ||
    { tail -20 "$DEB/apt-install.log" >&2; die "apt-get install of postgresql-common failed"; }
}
if [ -z "$PGC_BUILD" ]; then
  msg "postgresql-common $PGC_VERSION: $DEB_RELEASE's own"
  need_pkgs postgresql-common-dev
else
  timed "fetch postgresql-common ($DEBIAN_SUITE)" fetch_common
  if is_root; then chown -R "$BUILDER": "$DEB"; fi
  if [ -n "${DEB_REBUILD:-}" ] || [ "$(common_debs | wc -l)" != 3 ]; then
    timed "build postgresql-common $PGC_VERSION" build_common
  else
    msg "postgresql-common $PGC_VERSION: packages exist (DEB_REBUILD=1 rebuilds)"
  fi
  have=$(dpkg-query -W -f='${Version}' postgresql-common-dev 2>/dev/null || true)
  if [ -z "$have" ] || dpkg --compare-versions "$have" lt "$PGCOMMON_MIN"; then
    timed "install postgresql-common-dev $PGC_VERSION" install_common_dev
  fi
fi

# -------------------------------------------- 3.-5. postgresql-18, two flavours
BUILD_DEPS_DONE=
install_build_deps() {  # $1: unpacked source
  [ -z "$BUILD_DEPS_DONE" ] || return 0
  if (cd "$1" && dpkg-checkbuilddeps) >/dev/null 2>&1; then BUILD_DEPS_DONE=1; return 0; fi
  is_root || { (cd "$1" && dpkg-checkbuilddeps) || true; die "missing build dependencies (above); as root: apt-get build-dep $1"; }
  apt_updated
  timed "install postgresql-18 build-deps" \
    apt-get build-dep -y -q --build-profiles="${DEB_BUILD_PROFILES// /,}" "$1" > "$DEB/build-deps.log" 2>&1 ||
    { tail -30 "$DEB/build-deps.log" >&2; die "apt-get build-dep failed (log: $DEB/build-deps.log)"; }
  BUILD_DEPS_DONE=1
}

# build FLAVOUR (stock|series) unless its packages are current
build_pg() {
  local fl=$1 b=$DEB/build/$1 ver stamp
  if [ "$fl" = series ]; then ver=$SERIES_DEB_VERSION; else ver=$STOCK_DEB_VERSION; fi
  stamp="$ver|$DEB_BUILD_OPTIONS|$DEB_BUILD_PROFILES|$PGC_VERSION"
  [ "$fl" = stock ] || stamp="$stamp|$(cat "$TOP"/patches/*.patch | sha256sum | cut -d' ' -f1)"
  if [ -z "${DEB_REBUILD:-}" ] && [ -f "$b/stamp" ] && [ "$(cat "$b/stamp")" = "$stamp" ] &&
     ls "$b/postgresql-18_${ver}_"*.deb >/dev/null 2>&1; then
    msg "postgresql-18 $ver ($fl): packages are current (DEB_REBUILD=1 rebuilds)"
    return 0
  fi
  msg "postgresql-18 $ver ($fl): unpacking"
  unpack "$fl"
  local s=$b/$SRCPKG-$PG_VERSION
  [ "$fl" = stock ] || add_series "$s"
  install_build_deps "$s"
  # the series' source package too (-F: .dsc, .debian.tar.xz), stock: binaries
  local what=-F; [ "$fl" = series ] || what=-b
  msg "postgresql-18 $ver ($fl): building (log: $b/build.log)"
  (cd "$s" && as_builder env DEB_BUILD_OPTIONS="$DEB_BUILD_OPTIONS" DEB_BUILD_PROFILES="$DEB_BUILD_PROFILES" \
     "${NICE[@]}" dpkg-buildpackage -us -uc $what) > "$b/build.log" 2>&1 ||
    { tail -60 "$b/build.log" >&2; die "postgresql-18 ($fl) build failed (log: $b/build.log)"; }
  echo "$stamp" > "$b/stamp"
}
FLAVOURS=${DEB_FLAVOURS:-stock series}
for fl in $FLAVOURS; do
  timed "build postgresql-18 ($fl)" build_pg "$fl"
done

# ---------------------------------------------------------- 6. apt repositories
make_repo() {  # $1: dir, $2: flavour
  local r=$1 b=$DEB/build/$2
  rm -rf "$r"; mkdir -p "$r"
  # shellcheck disable=SC2046
  [ -z "$PGC_BUILD" ] || cp $(common_debs) "$r/"
  cp "$b"/*.deb "$r/"
  if [ "$2" = series ]; then
    cp "$b"/*.dsc "$b"/*.debian.tar.* "$r/"
    cp "$SRC/$ORIG_TARBALL" "$r/"
  fi
  (cd "$r" &&
    dpkg-scanpackages -m . /dev/null 2>/dev/null > Packages &&
    gzip -9nk Packages &&
    if ls ./*.dsc >/dev/null 2>&1; then dpkg-scansources . /dev/null 2>/dev/null > Sources; gzip -9nk Sources; fi &&
    apt-ftparchive -o "APT::FTPArchive::Release::Label=$3" release . > Release.new && mv Release.new Release)
}
[ -z "${FLAVOURS##*series*}" ] && make_repo "$DEB/repo" series "$SERIES_LABEL"
[ -z "${FLAVOURS##*stock*}" ] && make_repo "$DEB/stock" stock "$STOCK_LABEL"
if is_root; then chown -R "$BUILDER": "$DEB"; fi

echo
echo "Packages for $DEB_RELEASE (apt line: deb [trusted=yes] file:$DEB/repo ./):"
for f in "$DEB"/repo/*.deb; do
  [ -e "$f" ] || continue
  case $f in *-dbgsym_*) continue;; esac
  printf '  %-28s %s\n' "$(dpkg-deb -f "$f" Package)" "$(dpkg-deb -f "$f" Version)"
done
echo "Stock packages for the install test: $DEB/stock ($STOCK_DEB_VERSION)"
echo "Times ($TIMES):"
sed -n '/^--- make deb/h; /^--- make deb/!H; ${x;p}' "$TIMES" | sed 1d | sed 's/^/  /'
