#!/usr/bin/env bash
# pgindent over the C files the series changes (needs the check build, which
# builds pg_bsd_indent).
#   pgindent.sh          rewrite the files in work/postgresql (make indent);
#                        review with git diff there and commit as fixups
#   pgindent.sh --check  change nothing; fail if pgindent would change a
#                        file, or if a typedef the series declares is missing
#                        from src/tools/pgindent/typedefs.list (pgindent
#                        mis-indents code using a type it does not know)
. "$(dirname "$0")/../lib.sh"
as_builder_reexec "$@"
mode=${1:-fix}
build_config check
indent=$BLD/src/tools/pg_bsd_indent/pg_bsd_indent
[ -x "$indent" ] || "$TOP/scripts/build/build.sh" check
cd "$TREE"
mapfile -t files < <(git diff --name-only --diff-filter=AM "$UPSTREAM_TAG" -- '*.c' '*.h')
[ ${#files[@]} -gt 0 ] || exit 0

if [ "$mode" != "--check" ]; then
  perl src/tools/pgindent/pgindent --indent="$indent" "${files[@]}"
  git status --short
  exit 0
fi

rc=0
# Typedef names the series declares: "} Name;" closing a typedef'd struct,
# union or enum, and "typedef <type> Name;" / "typedef ... (*Name) (...)".
missing=$(git diff -U0 "$UPSTREAM_TAG" -- "${files[@]}" |
  perl -ne 'next unless /^\+(?!\+)/;
            print "$1\n" if /^\+\}\s*(\w+);/;
            print "$1\n" if /^\+typedef\s[^;{(]*?\b(\w+);/;
            print "$1\n" if /^\+typedef\s.*\(\s*\*\s*(\w+)\s*\)/;' |
  sort -u | while read -r t; do
    grep -qx -- "$t" src/tools/pgindent/typedefs.list || echo "$t"
  done)
if [ -n "$missing" ]; then
  echo "typedefs.list lacks typedefs the series declares:" $missing
  rc=1
fi
if ! perl src/tools/pgindent/pgindent --indent="$indent" --check --diff "${files[@]}" >"$WORK/pgindent.diff"; then
  echo "pgindent would change these files (run: make indent):"
  grep '^+++ ' "$WORK/pgindent.diff" | sed 's/^+++ /  /'
  head -60 "$WORK/pgindent.diff"
  rc=1
fi
[ "$rc" = 0 ] && msg "pgindent: clean (${#files[@]} files), typedefs.list complete"
exit "$rc"
