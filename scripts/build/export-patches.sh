#!/usr/bin/env bash
# Regenerate patches/ from the work tree: git format-patch -v$SERIES_VERSION,
# one file per commit after the upstream tag, and the cover letter.
#
# The cover letter's subject and text are kept in scripts/build/cover-letter.txt
# (first line: the subject; then a blank line and the body); the shortlog and
# diffstat below them are git's.  It is written as
# v<N>-0000-cover-letter.txt, not .patch, so that "git am patches/*.patch"
# applies the series as it stands (git am stops at a mail without a diff),
# as a reviewer applies the attachments of the mail.
#
# The output is stable: no commit ids, no git version signature, so
# unchanged patches come out byte-identical.
. "$(dirname "$0")/../lib.sh"
[ -d "$TREE/.git" ] || die "no work tree at $TREE (run: make tree)"
cover_src=$TOP/scripts/build/cover-letter.txt
[ -f "$cover_src" ] || die "no $cover_src"
v=$SERIES_VERSION
tmp=$(as_builder mktemp -d)
as_builder git -C "$TREE" format-patch -q -v"$v" --cover-letter --zero-commit \
  --no-signature --abbrev=12 -o "$tmp" "$UPSTREAM_TAG"..HEAD
# never leave patches/ empty: replace it only with what format-patch produced
if ! compgen -G "$tmp/v$v-0001-*.patch" >/dev/null; then
  as_builder rm -rf "$tmp"
  die "git format-patch produced no patches from $UPSTREAM_TAG..HEAD in $TREE; patches/ left as it was"
fi
# the cover letter: our subject and text in place of git's placeholders
# Git's per-file diffstat of the whole series is longer than the letter
# itself; the letter gets the total and the share of changed lines per
# directory instead (each patch keeps its own per-file diffstat).
dirstat=$(as_builder git -C "$TREE" diff --dirstat=lines,4 "$UPSTREAM_TAG"..HEAD)
python3 - "$tmp/v$v-0000-cover-letter.patch" "$cover_src" "$dirstat" <<'PY'
import re, sys
path, src, dirstat = sys.argv[1], sys.argv[2], sys.argv[3]
subject, _, body = open(src).read().partition("\n\n")
text = open(path).read()
for placeholder, value in (("*** SUBJECT HERE ***", subject.strip()),
                           ("*** BLURB HERE ***", body.strip())):
    if text.count(placeholder) != 1:
        sys.exit("cover letter: no single %r in git's output" % placeholder)
    text = text.replace(placeholder, value)
# the per-file diffstat: its " path | N +-" rows, up to the total line
lines = text.splitlines(True)
total = [i for i, l in enumerate(lines) if re.match(r" \d+ files? changed", l)]
if len(total) != 1:
    sys.exit("cover letter: no single diffstat total in git's output")
first = total[0]
while first > 0 and "|" in lines[first - 1]:
    first -= 1
summary = [lines[total[0]],
           " changed lines per directory (4% or more):\n"]
summary += [" " + l.strip() + "\n" for l in dirstat.splitlines() if l.strip()]
lines[first:total[0] + 1] = summary
# and the "create mode" summary: the patches carry it
text = "".join(l for l in lines
               if not re.match(r" (create|delete) mode \d+ ", l))
# no date line: unchanged text comes out byte-identical
text = "".join(l for l in text.splitlines(True) if not l.startswith("Date: "))
open(path, "w").write(text)
PY
rm -f "$TOP"/patches/*.patch "$TOP"/patches/*-cover-letter.txt
mkdir -p "$TOP/patches"
cp "$tmp"/v"$v"-0*.patch "$TOP/patches/"
mv "$TOP/patches/v$v-0000-cover-letter.patch" "$TOP/patches/v$v-0000-cover-letter.txt"
as_builder rm -rf "$tmp"
git -C "$TOP" status --short -- patches/ || true
ls "$TOP"/patches/
