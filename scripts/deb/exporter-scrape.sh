#!/usr/bin/env bash
# Scrape prometheus-postgres-exporter with the series' queries file while a
# checkpoint runs, and check the checkpoint metrics.  Called by make
# deb-check (step 2, against the packaged cluster); also usable by hand
# against any server of the series:
#
#   exporter-scrape.sh QUERIES.yaml 'host=/var/run/postgresql port=5432 user=postgres dbname=bench' OUT_DIR
#
# The database must have the extension pg_checkpoint_stats, and a checkpoint
# must be writing (or about to: the script waits up to 90 s for a row of
# pg_stat_progress_checkpoint with buffers processed) -- the caller makes
# one.  Runs the exporter of Debian's prometheus-postgres-exporter package on
# 127.0.0.1:$EXPORTER_PORT (default 19187; the package's own service, if it
# runs, stays on 9187) with --extend.query-path, as the connection's user
# (the caller runs this as that user, e.g. runuser -u postgres), scrapes
# /metrics, prints the checkpoint metrics and checks: the metric names of the
# queries file, a running checkpoint's phase label and non-zero progress, no
# error loading the file and, where the exporter has it (0.17.1), its own
# stat_checkpointer collector beside the file.  Exit 0 when every check
# passes.
set -euo pipefail
QUERIES=${1:?queries file}; DSN=${2:?libpq connection string}; OUT=${3:?output directory}
PORT=${EXPORTER_PORT:-19187}
EXPORTER=${EXPORTER:-/usr/bin/prometheus-postgres-exporter}
[ -x "$EXPORTER" ] || { echo "no $EXPORTER (apt-get install prometheus-postgres-exporter)" >&2; exit 1; }
mkdir -p "$OUT"
version=$("$EXPORTER" --version 2>&1 | sed -n 's/^postgres_exporter, version \([^ ]*\).*/\1/p' | head -1)
echo "exporter: $EXPORTER ${version:-(version unknown)}, queries: $QUERIES"
psql_() { psql -X -At "$DSN" -c "$1"; }

# wait until a checkpoint has processed buffers
seen=
for _ in $(seq 1 450); do
  seen=$(psql_ "SELECT phase || ', ' || buffers_processed || ' of ' || buffers_total FROM pg_stat_progress_checkpoint WHERE buffers_processed > 0" 2>/dev/null || true)
  [ -z "$seen" ] || break
  sleep 0.2
done
[ -n "$seen" ] || { echo "FAIL: no checkpoint with processed buffers within 90 s" >&2; exit 1; }
echo "checkpoint running: $seen"

# the exporter's own collector of pg_stat_checkpointer (0.17.1 has it, off
# by default; 0.11.1 has not): on, to check it works beside the file
own=()
help=$("$EXPORTER" --help 2>&1 || true)
if grep -q -- '--collector.stat_checkpointer' <<<"$help"; then own=(--collector.stat_checkpointer); fi
DATA_SOURCE_NAME=$DSN "$EXPORTER" --extend.query-path="$QUERIES" "${own[@]}" \
  --web.listen-address="127.0.0.1:$PORT" > "$OUT/exporter.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true' EXIT
metrics=$OUT/metrics.txt
for _ in $(seq 1 50); do
  if python3 - "$PORT" "$metrics" <<'PY' 2>/dev/null
import sys, urllib.request
with urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics", timeout=10) as r:
    open(sys.argv[2], "wb").write(r.read())
PY
  then break; fi
  sleep 0.2
done
[ -s "$metrics" ] || { cat "$OUT/exporter.log" >&2; echo "FAIL: no answer from the exporter" >&2; exit 1; }
grep -E '^pg_checkpoint_(stats|progress)_|^pg_stat_checkpointer_' "$metrics" | sed 's/^/  /'

bad=0
expect() {  # expect "what" grep-regex
  if grep -qE "$2" "$metrics"; then echo "  PASS  $1"; else echo "  FAIL  $1"; bad=1; fi
}
# every metric the queries file declares (LABEL columns are labels)
for m in $(python3 - "$QUERIES" <<'PY'
import re, sys
ns = None
for line in open(sys.argv[1]):
    if re.match(r"^[a-z_]+:\s*$", line):
        ns = line.split(":")[0]
    m = re.match(r"^\s+- ([a-z_]+):\s*$", line)
    if m and ns:
        print(f"{ns}_{m.group(1)}")
PY
); do
  case $m in *_type|*_phase) continue;; esac
  expect "metric $m" "^$m(\{| )"
done
expect "progress carries the phase label" '^pg_checkpoint_progress_buffers_processed\{.*phase="[a-z ]+"'
expect "a non-zero progress value (buffers processed)" '^pg_checkpoint_progress_buffers_processed\{[^}]*\} [1-9]'
expect "the queries file loaded without error" '^pg_exporter_user_queries_load_error\{[^}]*\} 0$'
if [ ${#own[@]} -gt 0 ]; then
  expect "the exporter's own stat_checkpointer collector beside the file" '^pg_scrape_collector_success\{collector="stat_checkpointer"\} 1$'
  expect "its pg_stat_checkpointer_buffers_written_total" '^pg_stat_checkpointer_buffers_written_total [0-9]'
fi
if grep -qiE 'error' "$OUT/exporter.log"; then
  echo "  NOTE  the exporter logged errors (its default collectors may not know PostgreSQL 18):"
  grep -iE 'error' "$OUT/exporter.log" | sort | uniq -c | sort -rn | head -5 | sed 's/^/        /'
fi
exit $bad
