#!/usr/bin/env bash
# Create or refresh the work tree $WORK/postgresql: a git repository whose
# first commit is the pristine upstream source, tagged upstream/<version>,
# followed by one commit per patch in patches/, applied with git am --3way.
#
# Re-running it never loses work: it refuses to touch a tree with uncommitted
# edits, does nothing when the tree already matches patches/, and otherwise
# keeps the old branch as backup/<timestamp> before re-applying patches/.
. "$(dirname "$0")/../lib.sh"
as_builder_reexec "$@"

G() { git -C "$TREE" -c user.name="${GIT_AUTHOR_NAME:-patch series}" -c user.email="${GIT_AUTHOR_EMAIL:-patches@localhost}" "$@"; }
shopt -s nullglob
patches=("$TOP"/patches/*.patch)

if [ ! -d "$TREE/.git" ]; then
  "$TOP/scripts/build/fetch-source.sh"
  msg "extracting $ORIG_TARBALL into $TREE"
  rm -rf "$TREE" "$TREE.tmp"
  mkdir -p "$TREE.tmp"
  tar -xjf "$WORK/src/$ORIG_TARBALL" -C "$TREE.tmp" --strip-components=1
  mv "$TREE.tmp" "$TREE"
  git init -q -b main "$TREE"
  G config core.autocrlf false
  # identity for commits made in the work tree (patch authors come from the patches)
  G config user.name "${GIT_AUTHOR_NAME:-Sorted Checkpoint Team}"
  G config user.email "${GIT_AUTHOR_EMAIL:-team@sorted-checkpoint.invalid}"
  G add -A -f .
  GIT_COMMITTER_DATE="2000-01-01T00:00:00Z" GIT_AUTHOR_DATE="2000-01-01T00:00:00Z" \
    G commit -q -m "PostgreSQL $PG_VERSION (pristine $ORIG_TARBALL)"
  G tag "$UPSTREAM_TAG"
else
  [ -z "$(G status --porcelain --untracked-files=no)" ] ||
    die "$TREE has uncommitted edits; commit them (into the right patch) or stash them first"
  # Does HEAD already equal upstream + patches/?
  tmp=$(mktemp -d)
  trap 'G worktree remove --force "$tmp/wt" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
  G worktree add -q --detach "$tmp/wt" "$UPSTREAM_TAG"
  if [ ${#patches[@]} -gt 0 ]; then
    git -C "$tmp/wt" -c user.name=x -c user.email=x@localhost am -q --3way "${patches[@]}" ||
      die "patches/ do not apply on $UPSTREAM_TAG"
  fi
  if [ "$(git -C "$tmp/wt" rev-parse 'HEAD^{tree}')" = "$(G rev-parse 'HEAD^{tree}')" ]; then
    msg "$TREE already matches patches/ (nothing to do)"
    exit 0
  fi
  backup=backup/$(date +%Y%m%d-%H%M%S)
  G branch "$backup" HEAD
  msg "work tree differs from patches/; old HEAD kept as branch $backup"
  G checkout -q -B main "$UPSTREAM_TAG"
fi

if [ ${#patches[@]} -gt 0 ]; then
  msg "applying ${#patches[@]} patch(es)"
  G am -q --3way "${patches[@]}" || die "git am failed; fix in $TREE (git am --continue/--abort)"
fi
G log --oneline "$UPSTREAM_TAG"..HEAD
