#!/usr/bin/env bash
. "$(dirname "$0")/../lib.sh"
as_builder_reexec "$@"
build_config release
if [ -f "$WORK/demo/data/postmaster.pid" ]; then
  "$PREFIX/bin/pg_ctl" -D "$WORK/demo/data" stop -m fast
else
  echo "demo server is not running"
fi
