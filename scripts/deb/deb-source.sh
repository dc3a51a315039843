#!/usr/bin/env bash
# make deb-source: the cheap half of make deb, run by .ci/run.  It catches a
# package that would no longer build, in about a minute and without building:
#
#   1. fetches Debian's postgresql-18 source package (DEBIAN_SOURCE_VERSION in
#      UPSTREAM; the orig tarball of make tree is reused) as make deb does;
#   2. unpacks it without Debian's patches, adds the series as make deb does
#      (debian/patches/sorted-checkpoint/, debian/patches/series, a
#      debian/changelog entry), then applies Debian's patches and ours with
#      `quilt push -a`: a patch of the series that no longer applies on top of
#      Debian's fails here, named;
#   3. builds the series' source package (dpkg-source -b: .dsc and
#      .debian.tar.xz) and unpacks it again (dpkg-source -x, as a build
#      does), which checks the patches and the changelog once more;
#   4. checks the version: the changelog's is the one deb.sh computes, and it
#      sorts above the stock packaging and below Debian's next revision and
#      next minor release (deblib.sh, check_versions).
#
# Output: work/deb/RELEASE/build/source-check/ (the tree and the source package) and
# its quilt.log; the steps' times appended to work/deb/RELEASE/times.txt.  Root installs
# dpkg-dev and quilt if missing; everything else runs as the build user.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/deblib.sh"

t_start=$(date +%s)
echo "--- make deb-source $(date -u '+%F %T') UTC" >> "$TIMES"
if is_root; then
  ensure_builder
  chown -R "$BUILDER": "$DEB"
fi
need_pkgs dpkg-dev quilt xz-utils bzip2 ca-certificates debian-archive-keyring
if is_root; then chown -R "$BUILDER": "$DEB"; fi

# the orig tarball once for make check and this (fetch-source.sh's fallbacks)
timed "deb-source: fetch $ORIG_TARBALL" bash "$TOP/scripts/build/fetch-source.sh"
timed "deb-source: fetch $SRCPKG $STOCK_DEB_VERSION" fetch_pg_source
if is_root; then chown -R "$BUILDER": "$DEB"; fi

B=$DEB/build/source-check
S=$B/$SRCPKG-$PG_VERSION
apply_all() {
  unpack source-check --skip-patches
  add_series "$S"
  # quilt as dpkg-source would apply them: debian/patches, -p1, no backups
  (cd "$S" && as_builder env QUILT_PATCHES=debian/patches QUILT_PC=.pc \
     quilt --quiltrc /dev/null push -a --fuzz=0) > "$B/quilt.log" 2>&1 || {
    tail -25 "$B/quilt.log" >&2
    die "the patches no longer apply on top of Debian's $STOCK_DEB_VERSION: $(sed -n 's/^Applying patch //p' "$B/quilt.log" | tail -1) (log: $B/quilt.log)"
  }
  msg "quilt push -a: $(grep -c '^Applying patch ' "$B/quilt.log") patches applied ($(grep -c '^sorted-checkpoint/' "$S/debian/patches/series") of the series), now at $(cd "$S" && as_builder env QUILT_PATCHES=debian/patches quilt --quiltrc /dev/null top)"
}
timed "deb-source: quilt push -a" apply_all

build_source() {
  # -i/-I: dpkg-source's default ignores (quilt's .pc is known to it)
  (cd "$B" && as_builder dpkg-source -b "$SRCPKG-$PG_VERSION") > "$B/source.log" 2>&1 ||
    { tail -25 "$B/source.log" >&2; die "dpkg-source -b failed (log: $B/source.log)"; }
  local dsc=$B/${SRCPKG}_$SERIES_DEB_VERSION.dsc
  [ -f "$dsc" ] || die "dpkg-source -b did not write $dsc (log: $B/source.log)"
  rm -rf "$B/again"
  as_builder dpkg-source -x "$dsc" "$B/again" > "$B/again.log" 2>&1 ||
    { tail -25 "$B/again.log" >&2; die "the series' source package does not unpack (log: $B/again.log)"; }
  msg "source package: $(basename "$dsc") ($(du -h "$B/${SRCPKG}_$SERIES_DEB_VERSION.debian.tar.xz" | cut -f1) debian.tar.xz)"
}
timed "deb-source: dpkg-source -b, -x" build_source

versions() {
  local cl
  cl=$(dpkg-parsechangelog -l "$B/again/debian/changelog" -S Version)
  [ "$cl" = "$SERIES_DEB_VERSION" ] || die "debian/changelog says $cl, expected $SERIES_DEB_VERSION"
  msg "version $cl (UPSTREAM: $PG_VERSION, Debian $STOCK_DEB_VERSION, series v$SERIES_VERSION):"
  check_versions "$cl" >&2 || die "the version $cl does not sort as it must (above)"
}
timed "deb-source: versions" versions
rm -rf "$B/again"
msg "make deb-source: passed in $(( $(date +%s) - t_start )) s"
