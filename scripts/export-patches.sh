#!/usr/bin/env bash
# Regenerate patches/ from the work tree: one file per commit after the
# upstream tag.  The output is stable: no commit ids, no patch numbers in the
# subject, no git version signature, so unchanged patches come out
# byte-identical.
. "$(dirname "$0")/lib.sh"
[ -d "$TREE/.git" ] || die "no work tree at $TREE (run: make tree)"
tmp=$(as_builder mktemp -d)
as_builder git -C "$TREE" format-patch -q --zero-commit --no-numbered --no-signature \
  --no-stat --abbrev=12 -o "$tmp" "$UPSTREAM_TAG"..HEAD
# never leave patches/ empty: replace it only with what format-patch produced
if ! compgen -G "$tmp/*.patch" >/dev/null; then
  as_builder rm -rf "$tmp"
  die "git format-patch produced no patches from $UPSTREAM_TAG..HEAD in $TREE; patches/ left as it was"
fi
rm -f "$TOP"/patches/*.patch
mkdir -p "$TOP/patches"
cp "$tmp"/*.patch "$TOP/patches/"
as_builder rm -rf "$tmp"
git -C "$TOP" status --short -- patches/ || true
ls "$TOP"/patches/
