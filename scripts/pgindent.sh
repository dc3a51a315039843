#!/usr/bin/env bash
# Run pgindent over the C files the series changes (needs the check build,
# which builds pg_bsd_indent).  Review with git diff in work/postgresql.
. "$(dirname "$0")/lib.sh"
as_builder_reexec "$@"
build_config check
indent=$BLD/src/tools/pg_bsd_indent/pg_bsd_indent
[ -x "$indent" ] || "$TOP/scripts/build.sh" check
cd "$TREE"
mapfile -t files < <(git diff --name-only --diff-filter=AM "$UPSTREAM_TAG" -- '*.c' '*.h')
[ ${#files[@]} -gt 0 ] || exit 0
perl src/tools/pgindent/pgindent --indent="$indent" "${files[@]}"
git status --short
