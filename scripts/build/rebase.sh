#!/usr/bin/env bash
# make rebase VERSION=18.7-1 [TARBALL=file] [APPLY=1]: move the series to
# another PostgreSQL release in one step.
#
#   rebase.sh DEBIAN_VERSION [--tarball FILE] [--apply]
#
# DEBIAN_VERSION is Debian's packaging of the new release (18.7-1: release
# 18.7), which make deb will build on.  The helper
#   1. obtains the new release's orig tarball: FILE (--tarball: its sha256 is
#      taken as it is, and printed), or Debian's archive (DEBIAN_SUITE in
#      UPSTREAM, through deblib.sh's private apt configuration; apt checks the
#      tarball against the signed Sources index, whose sha256 is the one kept);
#   2. commits it in the work tree (work/postgresql, which must be clean) as
#      a child of upstream/<old version>, so that git sees upstream's change,
#      tagged upstream/<new version>, and copies the tarball to work/src/;
#   3. cherry-picks every patch of the series onto it, each a 3-way merge,
#      in a temporary worktree; a patch that conflicts is named with its
#      conflicting files, and the next ones are tried on its side of those
#      files, so that each conflict named is a patch's own;
#   4. with --apply, and only when every patch applied: moves the work
#      tree's main branch to the result (the old one kept as
#      backup/<timestamp>), writes the new PG_VERSION, DEBIAN_SOURCE_VERSION
#      and ORIG_SHA256 into UPSTREAM, and exports patches/.  Then: make
#      check, make deb-source, and commit UPSTREAM and patches/.
# Without --apply, main, UPSTREAM and patches/ stay as they are.  Exit status:
# 0 when every patch applied, 1 when one conflicted.
. "$(dirname "$0")/../lib.sh"
as_builder_reexec "$@"
. "$(dirname "$0")/../deb/deblib.sh"

NEW_DEB=${1:-}
shift || true
TARBALL= APPLY=
while [ $# -gt 0 ]; do
  case $1 in
    --tarball) TARBALL=$(readlink -f "${2:?--tarball FILE}"); shift 2;;
    --apply) APPLY=1; shift;;
    *) die "unknown argument $1 (usage: rebase.sh DEBIAN_VERSION [--tarball FILE] [--apply])";;
  esac
done
[[ $NEW_DEB =~ ^([0-9]+)\.([0-9]+)-[0-9A-Za-z.+~]+$ ]] ||
  die "usage: rebase.sh DEBIAN_VERSION [--tarball FILE] [--apply]; DEBIAN_VERSION as Debian writes it, e.g. 18.7-1"
NEW_PG=${NEW_DEB%-*}
NEW_MAJOR=${NEW_PG%%.*}
NEW_SRCPKG=postgresql-$NEW_MAJOR
NEW_ORIG=${NEW_SRCPKG}_$NEW_PG.orig.tar.bz2
[ -d "$TREE/.git" ] || die "no work tree at $TREE (run: make tree)"
G() { git -C "$TREE" -c user.name="${GIT_AUTHOR_NAME:-Sorted Checkpoint Team}" \
  -c user.email="${GIT_AUTHOR_EMAIL:-team@sorted-checkpoint.invalid}" "$@"; }
[ -z "$(G status --porcelain --untracked-files=no)" ] ||
  die "$TREE has uncommitted edits; commit or stash them first"
[ "$(G rev-parse HEAD)" != "$(G rev-parse "$UPSTREAM_TAG")" ] || die "$TREE has no patches on $UPSTREAM_TAG"
[ "$NEW_PG" != "$PG_VERSION" ] || die "the series is on $PG_VERSION already"

tmp=$(mktemp -d)
trap 'G worktree remove --force "$tmp/wt" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT

# ---------------------------------------------------------- 1. the tarball
if [ -n "$TARBALL" ]; then
  [ -f "$TARBALL" ] || die "--tarball $TARBALL: no such file"
  tarball=$TARBALL
  sha=$(sha256sum "$tarball" | cut -d' ' -f1)
  msg "tarball $tarball (sha256 $sha, as given)"
else
  mkdir -p "$A/lists/partial" "$A/cache/archives/partial" "$tmp/dl"
  echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $DEBIAN_SUITE main" \
    > "$A/sources.list"
  : > "$A/status"
  papt update > "$A/update.log" 2>&1 || { cat "$A/update.log" >&2; die "apt-get update (private, $DEBIAN_SUITE sources) failed"; }
  (cd "$tmp/dl" && papt source --download-only "$NEW_SRCPKG=$NEW_DEB") > "$tmp/source.log" 2>&1 ||
    die "Debian's archive ($DEBIAN_SUITE) does not provide $NEW_SRCPKG $NEW_DEB yet (it has: $(pcache showsrc "$NEW_SRCPKG" 2>/dev/null | sed -n 's/^Version: //p' | tr '\n' ' ')); give the release's tarball with --tarball FILE"
  tarball=$tmp/dl/$NEW_ORIG
  [ -f "$tarball" ] || die "the archive's $NEW_SRCPKG $NEW_DEB has no $NEW_ORIG"
  sha=$(pcache showsrc "$NEW_SRCPKG=$NEW_DEB" | awk -v f="$NEW_ORIG" '/^Checksums-Sha256:/{c=1;next} /^[^ ]/{c=0} c && $3 == f {print $1; exit}')
  [ "$(sha256sum "$tarball" | cut -d' ' -f1)" = "$sha" ] || die "$NEW_ORIG does not match the archive's index"
  msg "tarball $NEW_ORIG from Debian's archive ($NEW_SRCPKG $NEW_DEB, sha256 $sha)"
fi

# ------------------------------------------- 2. the new release, as a commit
mkdir -p "$tmp/src"
tar -xaf "$tarball" -C "$tmp/src" --strip-components=1 || die "cannot unpack $tarball"
[ -f "$tmp/src/configure" ] || die "$tarball is not a PostgreSQL source tarball"
newtree=$(GIT_INDEX_FILE=$tmp/index G --work-tree="$tmp/src" add -A -f . &&
          GIT_INDEX_FILE=$tmp/index G write-tree)
newbase=$(GIT_COMMITTER_DATE="2000-01-01T00:00:00Z" GIT_AUTHOR_DATE="2000-01-01T00:00:00Z" \
  G commit-tree "$newtree" -p "$UPSTREAM_TAG" -m "PostgreSQL $NEW_PG (pristine $(basename "$tarball"))")
# the same tarball gives the same commit: re-runs move the tag onto itself
G tag -f "upstream/$NEW_PG" "$newbase" >/dev/null
mkdir -p "$WORK/src"
cp "$tarball" "$WORK/src/$NEW_ORIG"
msg "upstream $PG_VERSION -> $NEW_PG (tag upstream/$NEW_PG, tarball in work/src/): $(G diff --shortstat "$UPSTREAM_TAG" "$newbase")"

# ------------------------------------------------ 3. the patches, one by one
G worktree add -q --detach "$tmp/wt" "$newbase"
W() { git -C "$tmp/wt" -c user.name="${GIT_AUTHOR_NAME:-Sorted Checkpoint Team}" \
  -c user.email="${GIT_AUTHOR_EMAIL:-team@sorted-checkpoint.invalid}" "$@"; }
n=0 bad=0
report=$tmp/report
for c in $(G rev-list --reverse "$UPSTREAM_TAG"..HEAD); do
  n=$((n + 1))
  subj=$(G log -1 --format=%s "$c")
  if W cherry-pick --allow-empty "$c" > "$tmp/pick.log" 2>&1; then
    printf '  %04d  applied     %s\n' "$n" "$subj" | tee -a "$report"
  else
    bad=$((bad + 1))
    files=$(W diff --name-only --diff-filter=U | tr '\n' ' ')
    printf '  %04d  CONFLICT    %s\n              in: %s\n' "$n" "$subj" "${files:-(see git cherry-pick $c)}" | tee -a "$report"
    # To tell which later patches conflict on their own, go on from this
    # patch's side of the conflicting files (upstream's change to them is
    # set aside here; resolving it is the work the report points to).
    for f in $files; do
      W checkout -q --theirs -- "$f" 2>/dev/null && W add -- "$f" || W rm -q --cached -- "$f" >/dev/null 2>&1 || true
    done
    W commit -q --allow-empty -C "$c" >/dev/null 2>&1 || { W cherry-pick --abort >/dev/null 2>&1 || W reset -q --hard; }
  fi
done
echo "$((n - bad)) of $n patches applied to $NEW_PG with a 3-way merge, $bad conflicted"
if [ "$bad" -gt 0 ]; then
  cat <<EOT
To resolve, in $TREE:
  git checkout -b rebase-$NEW_PG upstream/$NEW_PG
  git cherry-pick each commit of $UPSTREAM_TAG..main in order, fixing each conflict
    (edit, git add, git cherry-pick --continue)
  git checkout -B main rebase-$NEW_PG   (the old main: git branch backup/... first)
  in UPSTREAM: PG_VERSION=$NEW_PG, DEBIAN_SOURCE_VERSION=$NEW_DEB, ORIG_SHA256=$sha
  make export, make check, make deb-source
EOT
  exit 1
fi
[ -n "$APPLY" ] || { echo "(dry run: nothing changed; --apply moves the series to $NEW_PG)"; exit 0; }

# -------------------------------------------------------------- 4. apply
rebased=$(W rev-parse HEAD)
G worktree remove --force "$tmp/wt"
backup=backup/$(date +%Y%m%d-%H%M%S)
G branch "$backup" HEAD
G checkout -q -B main "$rebased"
sed -i -e "s/^PG_VERSION=.*/PG_VERSION=$NEW_PG/" -e "s/^DEBIAN_SOURCE_VERSION=.*/DEBIAN_SOURCE_VERSION=$NEW_DEB/" \
  -e "s/^ORIG_SHA256=.*/ORIG_SHA256=$sha/" "$TOP/UPSTREAM"
msg "UPSTREAM now names $NEW_PG ($NEW_DEB); old main kept as $backup"
bash "$TOP/scripts/build/export-patches.sh"
echo "Next: make check, make deb-source, then commit UPSTREAM and patches/."
