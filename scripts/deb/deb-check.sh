#!/usr/bin/env bash
# make deb-check, for the Debian release this runs on (deb-releases.sh runs
# it on this machine and in a chroot of each other release): the install
# test of the Debian packages that `make deb` built, written to be read as a
# how-to.  ROOT, and it CHANGES THE SYSTEM'S PACKAGES: run it on a throwaway
# machine.  It drops and recreates the cluster "18 main".
#
#   1. install the stock packages (work/deb/RELEASE/stock: Debian's
#      postgresql-18 18.6-3, rebuilt here unchanged; on a real server:
#      apt.postgresql.org's), create the cluster with pg_createcluster, load
#      pgbench data, install contrib extensions, run a checkpoint;
#   2. apt install the series' packages (work/deb/RELEASE/repo) over them, apt-mark
#      hold them; the cluster restarts under the series through
#      postgresql-common's maintainer scripts; check data, the log, the
#      extension pg_checkpoint_stats, pg_stat_progress_checkpoint, Debian's
#      prometheus-postgres-exporter with the series' queries file, scraped
#      during a checkpoint (scripts/deb/exporter-scrape.sh), the contrib
#      extensions and JIT;
#   3. roll back: apt-mark unhold, apt install the stock versions; the
#      cluster restarts under stock, data and statistics intact;
#   4. Debian's autopkgtests of the source package (debian/tests:
#      run-testsuite, installcheck), called as autopkgtest calls them, against
#      the installed series; the tests that fail are run again against the
#      stock packages, to tell the series' failures from the stock ones.
#
# DEB_CHECK_STEPS (default "1 2 3 4") selects steps (2 and 3 need 1 first;
# "1 2 3" is the install test alone).  Output: work/deb/RELEASE/check/ (logs, the
# summary in summary.txt); times appended to work/deb/times.txt (both in
# work/deb/RELEASE).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/deblib.sh"

[ "$(id -u)" = 0 ] || die "the install test installs packages: run it as root, on a throwaway machine"
OUT=$DEB/check
STEPS=${DEB_CHECK_STEPS:-1 2 3 4}
STOCK_V=$STOCK_DEB_VERSION
MAJOR=$PG_MAJOR
for r in repo stock; do
  [ -f "$DEB/$r/Packages" ] || die "$DEB/$r/Packages missing: run make deb first"
done
# the series' version is the one $DEB/repo holds (make deb-check runs make
# deb first, which rebuilds it when patches/ or SERIES_VERSION changed)
deb=
for f in "$DEB"/repo/postgresql-"$MAJOR"_"$STOCK_V"+sortedckpt*_*.deb; do [ -e "$f" ] && deb=$f; break; done
[ -n "$deb" ] || die "$DEB/repo has no postgresql-$MAJOR $STOCK_V+sortedckptN: run make deb"
SERIES_V=$(dpkg-deb -f "$deb" Version)
[ "$SERIES_V" = "$SERIES_DEB_VERSION" ] ||
  msg "NOTE: $DEB/repo holds $SERIES_V, UPSTREAM's series is version $SERIES_VERSION (make deb rebuilds)"
rm -rf "$OUT"; mkdir -p "$OUT"
SUMMARY=$OUT/summary.txt
echo "--- make deb-check $(date -u '+%F %T') UTC, $DEB_RELEASE, steps: $STEPS" >> "$TIMES"

ok=0; bad=0
pgcommon_v() { local v; v=$(dpkg-query -W -f='${db:Status-Abbrev}${Version}' postgresql-common 2>/dev/null || true); [ "${v:0:2}" = ii ] && echo "${v:3}" || echo none; }
# the postgresql-common the packages bring (make deb builds sid's where the
# release's is too old), or none: the release's stays
REPO_PGC=
for f in "$DEB"/repo/postgresql-common_*_all.deb; do [ -e "$f" ] && REPO_PGC=$(dpkg-deb -f "$f" Version); break; done
pass() { ok=$((ok + 1)); echo "  PASS  $*" | tee -a "$SUMMARY"; }
fail() { bad=$((bad + 1)); echo "  FAIL  $*" | tee -a "$SUMMARY"; }
check() { local what=$1; shift; if "$@"; then pass "$what"; else fail "$what"; fi; }
say() { echo "$*" | tee -a "$SUMMARY"; }
say "$(. /etc/os-release && echo "$PRETTY_NAME"): series $SERIES_V, stock $STOCK_V"
say "postgresql-common before the test: $(pgcommon_v)"
step_t0=0
step_begin() { step_t0=$(date +%s); say ""; say "== $*"; }
step_end() { printf '%-40s %5d s\n' "deb-check: $1" $(( $(date +%s) - step_t0 )) | tee -a "$TIMES" "$SUMMARY" >&2; }
apt_log() { "$@" >> "$OUT/apt.log" 2>&1 || { tail -30 "$OUT/apt.log" >&2; die "failed: $*"; }; }

# The packages a server needs.  (postgresql-18 recommends -jit; libpq5 comes
# from the same source and must not stay at Debian 12's 15.x.)
SERVER_PKGS="postgresql-$MAJOR postgresql-client-$MAJOR postgresql-$MAJOR-jit libpq5"
# Every binary package of the source (autopkgtest's "@"), docs excepted (nodoc)
ALL_PKGS="$SERVER_PKGS libpq-dev libpq-oauth libecpg6 libecpg-dev libecpg-compat3 libpgtypes3
  postgresql-server-dev-$MAJOR postgresql-plperl-$MAJOR postgresql-plpython3-$MAJOR postgresql-pltcl-$MAJOR"
pinned() { local v=$1 p; shift; for p in "$@"; do printf '%s=%s ' "$p" "$v"; done; }

# ------------------------------------------------------------------ preparation
# On a server (systemd), postgresql-18's prerm stops the version's clusters
# and its postinst starts them (postgresql-common's maintscripts-functions,
# through invoke-rc.d).  In a container without an init, invoke-rc.d would
# stop but never start them (the runlevel is unknown), and Docker images'
# /usr/sbin/policy-rc.d (exit 101) forbids both.  For the duration of the
# test a policy-rc.d that allows the "postgresql" init script (and nothing
# else) takes its place; the original is put back at exit.
POLICY=/usr/sbin/policy-rc.d
LIST=/etc/apt/sources.list.d/sorted-checkpoint.list
restore() {
  rm -f "$POLICY"
  if [ -f "$POLICY.deb-check" ]; then mv "$POLICY.deb-check" "$POLICY"; fi
  rm -f /etc/postgresql-common/createcluster.d/deb-check.conf
  # a server keeps its repository line; this machine would keep pointing
  # apt at work/deb, which a fresh clone does not have
  rm -f "$LIST"
}
trap restore EXIT
if [ -f "$POLICY" ] && [ ! -f "$POLICY.deb-check" ]; then mv "$POLICY" "$POLICY.deb-check"; fi
if [ ! -d /run/systemd/system ]; then
  printf '#!/bin/sh\n# make deb-check: let the postgresql init script run, deny the rest\n[ "$1" = postgresql ] && exit 0\nexit 101\n' > "$POLICY"
  chmod 755 "$POLICY"
fi

# Both repositories, as a DBA would list them.  On a server the stock packages
# come from Debian or apt.postgresql.org, already configured; here they are
# work/deb/RELEASE/stock.  [trusted=yes]: these local repositories are not signed.
cat > "$LIST" <<EOF
deb [trusted=yes] file:$DEB/repo ./
deb [trusted=yes] file:$DEB/stock ./
EOF
chmod o+rx "$DEB_ROOT" "$DEB" "$DEB/repo" "$DEB/stock"
apt_update_local() {  # apt-get update of these two repositories only
  apt_log apt-get update -o Dir::Etc::SourceList="$LIST" -o Dir::Etc::SourceParts=/dev/null -o APT::Get::List-Cleanup=0 \
    -o Acquire::AllowReleaseInfoChange::Label=true
}

PSQL_PORT=
psql_() { runuser -u postgres -- psql -X -v ON_ERROR_STOP=1 -p "$PSQL_PORT" "$@"; }
q() { psql_ -At -d bench -c "$1"; }
cluster_status() { pg_lsclusters -h | awk -v v="$MAJOR" '$1 == v && $2 == "main" {print $4}'; }
postmaster_pid() { head -1 "/var/lib/postgresql/$MAJOR/main/postmaster.pid" 2>/dev/null; }
LOG=/var/log/postgresql/postgresql-$MAJOR-main.log
last_ckpt_line() { grep 'checkpoint complete' "$LOG" | tail -1; }
# stats that only pgbench changes (our checks read, they do not write)
STATS_SQL="SELECT string_agg(format('%s:%s/%s/%s', relname, n_tup_ins, n_tup_upd, n_tup_del), ' ' ORDER BY relname) FROM pg_stat_user_tables WHERE relname LIKE 'pgbench%'"
DATA_SQL="SELECT (SELECT count(*) FROM pgbench_accounts) || ' accounts, sum(abalance)=' || (SELECT sum(abalance) FROM pgbench_accounts) || ', ' || (SELECT count(*) FROM pgbench_history) || ' history rows'"

if [[ " $STEPS " = *" 1 "* ]]; then
  step_begin "1. stock packages $STOCK_V, a new cluster with pgbench data"
  # start from no postgresql-18 at all (a previous run's cluster and packages)
  if pg_lsclusters -h 2>/dev/null | awk -v v="$MAJOR" '$1 == v && $2 == "main"' | grep -q .; then
    pg_dropcluster --stop "$MAJOR" main
  fi
  apt_update_local
  # the packages of this source a previous run left (not libpq5: other
  # packages of the system need a libpq5; the install below pins its version)
  old=""
  for p in $ALL_PKGS; do
    [ "$p" != libpq5 ] || continue
    case $(dpkg-query -W -f='${Status} ${Version}' "$p" 2>/dev/null) in
      *installed\ "$PG_VERSION"-*) old="$old $p";;
    esac
  done
  # shellcheck disable=SC2086
  [ -z "$old" ] || apt_log apt-get purge -y $old
  # we create the cluster ourselves, with checksums (initdb's default in 18)
  mkdir -p /etc/postgresql-common/createcluster.d
  echo "create_main_cluster = false" > /etc/postgresql-common/createcluster.d/deb-check.conf

  # shellcheck disable=SC2046
  apt_log apt-get install -y --allow-downgrades $(pinned "$STOCK_V" $SERVER_PKGS)
  check "installed postgresql-$MAJOR $STOCK_V" [ "$(dpkg-query -W -f='${Version}' "postgresql-$MAJOR")" = "$STOCK_V" ]
  say "  postgresql-common: $(pgcommon_v)"
  pg_createcluster "$MAJOR" main --start -o shared_preload_libraries=pg_stat_statements -- --data-checksums > "$OUT/createcluster.log" 2>&1 ||
    { cat "$OUT/createcluster.log"; die "pg_createcluster failed"; }
  PSQL_PORT=$(pg_conftool -s "$MAJOR" main show port)
  check "cluster $MAJOR/main online (port $PSQL_PORT)" [ "$(cluster_status)" = online ]
  runuser -u postgres -- createdb -p "$PSQL_PORT" bench
  runuser -u postgres -- pgbench -p "$PSQL_PORT" -i -s 10 -q bench > "$OUT/pgbench-init.log" 2>&1
  runuser -u postgres -- pgbench -p "$PSQL_PORT" -c 2 -T 10 bench > "$OUT/pgbench-run.log" 2>&1
  # contrib extensions installed under stock: pg_stat_statements (preloaded),
  # pg_trgm (a GIN index, used by a query after each package change)
  psql_ -q -d bench <<'EOF'
CREATE EXTENSION pg_stat_statements;
CREATE EXTENSION pg_trgm;
CREATE TABLE words AS SELECT md5(i::text) AS w FROM generate_series(1, 20000) i;
CREATE INDEX words_trgm ON words USING gin (w gin_trgm_ops);
CHECKPOINT;
EOF
  say "  version(): $(q 'SELECT version()')"
  check "data_checksums = on" [ "$(q 'SHOW data_checksums')" = on ]
  say "  data: $(q "$DATA_SQL")"
  say "  log: $(last_ckpt_line)"
  check "stock checkpoint line has no '; sort='" bash -c "! grep -q 'sort=' <<<\"\$1\"" _ "$(last_ckpt_line)"
  step_end "1. stock install + data"
fi

PSQL_PORT=${PSQL_PORT:-$(pg_conftool -s "$MAJOR" main show port 2>/dev/null || echo 5432)}
trgm_ok() {  # the pg_trgm index answers like a sequential scan
  local a b
  a=$(psql_ -qAt -d bench -c "SET enable_seqscan = off" -c "SELECT count(*) FROM words WHERE w LIKE '%abc%'") &&
  b=$(psql_ -qAt -d bench -c "SET enable_indexscan = off" -c "SET enable_bitmapscan = off" -c "SELECT count(*) FROM words WHERE w LIKE '%abc%'") &&
  psql_ -qAt -d bench -c "SET enable_seqscan = off" -c "EXPLAIN SELECT count(*) FROM words WHERE w LIKE '%abc%'" | grep -q words_trgm &&
  [ "$a" = "$b" ] && [ "$a" -gt 0 ]
}

if [[ " $STEPS " = *" 2 "* ]]; then
  step_begin "2. apt install the series ($SERIES_V) over stock"
  data_before=$(q "$DATA_SQL"); stats_before=$(q "$STATS_SQL"); pid_before=$(postmaster_pid)
  pgc_before=$(pgcommon_v)
  apt_update_local
  # What a DBA runs (the repository line is in $LIST):
  #   apt install postgresql-18=VERSION postgresql-client-18=VERSION postgresql-18-jit=VERSION libpq5=VERSION
  #   apt-mark hold postgresql-18 postgresql-client-18 postgresql-18-jit libpq5
  # shellcheck disable=SC2046
  apt_log apt-get install -y $(pinned "$SERIES_V" $SERVER_PKGS)
  # shellcheck disable=SC2086
  apt_log apt-mark hold $SERVER_PKGS
  # The other way to keep the series (DEBIAN.md): an apt preference for its
  # repository's Label, which keeps its versions over other repositories'
  # (a later minor release) and lets the series' own updates in.  Checked
  # with a preferences file of its own, not left on the machine.
  prefs=$OUT/preferences
  printf 'Package: *\nPin: release l=%s\nPin-Priority: 990\n' "$SERIES_LABEL" > "$prefs"
  pol=$(apt-cache -o Dir::Etc::Preferences="$prefs" -o Dir::Etc::PreferencesParts=/dev/null policy "postgresql-$MAJOR")
  check "an apt pin of the series' Label ('$SERIES_LABEL') gives its versions priority 990" \
    bash -c 'grep -qE "^ +990 file:" <<<"$1" && grep -qxF "  Candidate: $2" <<<"$1"' _ "$pol" "$SERIES_V"
  check "installed postgresql-$MAJOR $SERIES_V, held" \
    bash -c '[ "$(dpkg-query -W -f="\${Version}" "$1")" = "$2" ] && apt-mark showhold | grep -qx "$1"' _ "postgresql-$MAJOR" "$SERIES_V"
  check "cluster restarted by the packages (postmaster pid $pid_before -> $(postmaster_pid))" \
    bash -c '[ "$1" = online ] && [ -n "$2" ] && [ "$2" != "$3" ]' _ "$(cluster_status)" "$(postmaster_pid)" "$pid_before"
  v=$(q 'SELECT version()'); say "  version(): $v"
  check "version() names $SERIES_V" grep -qF "(Debian $SERIES_V)" <<<"$v"
  if [ -n "$REPO_PGC" ]; then
    check "postgresql-common is the packages' $REPO_PGC (was $pgc_before)" [ "$(pgcommon_v)" = "$REPO_PGC" ]
  else
    check "postgresql-common is still $DEB_RELEASE's $pgc_before" [ "$(pgcommon_v)" = "$pgc_before" ]
  fi
  check "data intact ($(q "$DATA_SQL"))" [ "$(q "$DATA_SQL")" = "$data_before" ]
  check "table statistics kept ($stats_before)" [ "$(q "$STATS_SQL")" = "$stats_before" ]
  q 'CHECKPOINT' >/dev/null
  line=$(last_ckpt_line); say "  log ($LOG): $line"
  check "checkpoint complete line ends with '; sort='" grep -qE '; sort=[0-9.]+ s$' <<<"$line"
  check "CREATE EXTENSION pg_checkpoint_stats" psql_ -q -d bench -c 'CREATE EXTENSION pg_checkpoint_stats'
  say "  pg_checkpoint_stats: $(q 'SELECT row_to_json(s) FROM pg_checkpoint_stats s')"
  # a spread checkpoint to watch: dirty every page of pgbench_accounts, then a
  # timed checkpoint with checkpoint_timeout = 30s (as make demo does)
  q "UPDATE pgbench_accounts SET filler = filler" >/dev/null
  psql_ -d bench -q -c "ALTER SYSTEM SET checkpoint_timeout = '30s'" -c "SELECT pg_reload_conf()" >/dev/null
  seen=""
  for _ in $(seq 1 300); do
    seen=$(q "SELECT format('%s (flags: %s), phase %s, %s of %s buffers processed', type, flags, phase, buffers_processed, buffers_total) FROM pg_stat_progress_checkpoint" 2>/dev/null || true)
    [ -z "$seen" ] || break
    sleep 0.2
  done
  say "  pg_stat_progress_checkpoint: ${seen:-(no row within 60 s)}"
  check "pg_stat_progress_checkpoint shows a running checkpoint" [ -n "$seen" ]
  # the monitoring DBAs run: Debian's prometheus-postgres-exporter with the
  # queries file the series installs, scraped during this checkpoint
  apt_log apt-get install -y --no-install-recommends prometheus-postgres-exporter
  queries=/usr/share/postgresql/$MAJOR/extension/pg_checkpoint_stats.exporter.yaml
  chmod o+rx "$OUT"; mkdir -p "$OUT/exporter"; chown postgres: "$OUT/exporter"
  if runuser -u postgres -- bash "$TOP/scripts/deb/exporter-scrape.sh" "$queries" \
       "host=/var/run/postgresql port=$PSQL_PORT user=postgres dbname=bench" "$OUT/exporter" > "$OUT/exporter/scrape.txt" 2>&1; then
    pass "prometheus-postgres-exporter $(dpkg-query -W -f='${Version}' prometheus-postgres-exporter) scrapes the checkpoint metrics ($OUT/exporter/scrape.txt)"
  else
    fail "prometheus-postgres-exporter scrape ($OUT/exporter/scrape.txt)"
  fi
  sed 's/^/    /' "$OUT/exporter/scrape.txt" | tee -a "$SUMMARY"
  psql_ -d bench -q -c "ALTER SYSTEM RESET checkpoint_timeout" -c "SELECT pg_reload_conf()" >/dev/null
  check "contrib extension pg_trgm (installed under stock) loads and its index answers" trgm_ok
  check "pg_stat_statements (preloaded since stock) works" bash -c '[ "$(runuser -u postgres -- psql -X -p "$1" -d bench -Atc "SELECT count(*) > 0 FROM pg_stat_statements")" = t ]' _ "$PSQL_PORT"
  check "JIT (postgresql-$MAJOR-jit) compiles a query" bash -c 'runuser -u postgres -- psql -X -p "$1" -d bench -Atc "SET jit_above_cost = 0" -c "EXPLAIN (ANALYZE) SELECT sum(abalance) FROM pgbench_accounts" | grep -q "^JIT:"' _ "$PSQL_PORT"
  step_end "2. upgrade to the series + checks"
fi

if [[ " $STEPS " = *" 3 "* ]]; then
  step_begin "3. roll back to stock ($STOCK_V)"
  q 'CHECKPOINT' >/dev/null
  data_before=$(q "$DATA_SQL"); stats_before=$(q "$STATS_SQL"); pid_before=$(postmaster_pid)
  ckpt_before=$(q "SELECT num_timed FROM pg_stat_checkpointer")
  #   apt-mark unhold postgresql-18 postgresql-client-18 postgresql-18-jit libpq5
  #   apt install --allow-downgrades postgresql-18=18.6-3 postgresql-client-18=18.6-3 ...
  # shellcheck disable=SC2086
  apt_log apt-mark unhold $SERVER_PKGS
  # shellcheck disable=SC2046
  apt_log apt-get install -y --allow-downgrades $(pinned "$STOCK_V" $SERVER_PKGS)
  check "installed postgresql-$MAJOR $STOCK_V" [ "$(dpkg-query -W -f='${Version}' "postgresql-$MAJOR")" = "$STOCK_V" ]
  check "cluster restarted under stock (postmaster pid $pid_before -> $(postmaster_pid))" \
    bash -c '[ "$1" = online ] && [ -n "$2" ] && [ "$2" != "$3" ]' _ "$(cluster_status)" "$(postmaster_pid)" "$pid_before"
  v=$(q 'SELECT version()'); say "  version(): $v"
  check "version() names $STOCK_V" grep -qF "(Debian $STOCK_V)" <<<"$v"
  check "data intact ($(q "$DATA_SQL"))" [ "$(q "$DATA_SQL")" = "$data_before" ]
  check "table statistics kept ($stats_before)" [ "$(q "$STATS_SQL")" = "$stats_before" ]
  check "checkpointer statistics kept (num_timed $ckpt_before)" [ "$(q "SELECT num_timed FROM pg_stat_checkpointer")" = "$ckpt_before" ]
  check "pg_trgm and its index still work" trgm_ok
  err=$(q 'SELECT * FROM pg_checkpoint_stats' 2>&1 || true)
  say "  pg_checkpoint_stats under stock (expected to fail): $err"
  check "DROP EXTENSION pg_checkpoint_stats works on stock" psql_ -q -d bench -c 'DROP EXTENSION pg_checkpoint_stats'
  q 'CHECKPOINT' >/dev/null
  line=$(last_ckpt_line); say "  log: $line"
  check "stock's checkpoint line again (no '; sort=')" bash -c "! grep -q 'sort=' <<<\"\$1\"" _ "$line"
  step_end "3. roll back to stock + checks"
fi

# ---------------------------------------------------------------- autopkgtests
# Called as autopkgtest's null runner would: from the unpacked source
# (a copy of what they read of $DEB/build/series/postgresql-18-18.6:
# installcheck edits the regression files), with the test dependencies of debian/tests/control and
# every binary package of the source installed, AUTOPKGTEST_TMP set.
SRCTREE=$DEB/build/series/$DEBIAN_SOURCE_PACKAGE-$PG_VERSION
# postgresql-common's test suite checks after each test that no postgres
# process is left on the machine ("No postgres processes left behind"): any
# other PostgreSQL running here (a developer's make check, say) fails it.  An
# autopkgtest testbed runs nothing else; a PID namespace of their own (with
# its own /proc, and mount namespace for the suite's tmpfs mounts) gives the
# tests the same view.
TESTBED=(unshare --pid --fork --mount-proc)
run_test() {  # $1: label (series|stock), $2: run-testsuite|installcheck, $3...: testsuite's test files (default all)
  local label=$1 t=$2 tree tmp t0 rc=0; shift 2
  tree=$OUT/src-$label
  if [ ! -d "$tree" ]; then  # what the tests read of the source tree
    mkdir -p "$tree/debian" "$tree/src/test"
    cp -a "$SRCTREE/debian/changelog" "$SRCTREE/debian/control" "$SRCTREE/debian/tests" "$tree/debian/"
    cp -a "$SRCTREE/src/test/regress" "$tree/src/test/"
    chmod -R o+rX "$OUT"
  fi
  # the test suite stops every cluster first, which it cannot do from inside
  # its PID namespace for a postmaster started outside: stop them from here
  pg_lsclusters -h | while read -r v c _ st _; do
    [ "$st" != online ] || pg_ctlcluster "$v" "$c" stop
  done
  tmp=$(mktemp -d); t0=$(date +%s)
  if [ "$t" = run-testsuite ] && [ $# -gt 0 ]; then
    # what debian/tests/run-testsuite runs, for the given tests only
    (cd /usr/share/postgresql-common && AUTOPKGTEST_TMP=$tmp "${TESTBED[@]}" ./testsuite -v "$MAJOR" "$@") > "$OUT/$label-$t.log" 2>&1 || rc=$?
  else
    (cd "$tree" && AUTOPKGTEST_TMP=$tmp "${TESTBED[@]}" "debian/tests/$t") > "$OUT/$label-$t.log" 2>&1 || rc=$?
  fi
  rm -rf "$tmp"
  printf '%-40s %5d s\n' "deb-check: autopkgtest $t ($label)" $(( $(date +%s) - t0 )) >> "$TIMES"
  echo "$rc" > "$OUT/$label-$t.rc"
  return 0
}
failed_files() { sed -n 's/^Failed tests: *//p' "$1" | tr ' ' '\n' | grep . | sort -u | tr '\n' ' '; }
summarize_testsuite() {  # $1: log -> assertions, test files, failed files
  local log=$1 okc notok
  okc=$(grep -cE '^ *ok [0-9]' "$log" || true); notok=$(grep -cE '^ *not ok [0-9]' "$log" || true)
  echo "$(grep -c '^### PostgreSQL test' "$log") test files, TAP assertions: $okc ok, $notok not ok; failed files: $(failed_files "$log" | sed 's|[^ ]*/||g')"
}
summarize_regress() {  # pg_regress's closing line
  grep -E '^# (All [0-9]+ tests passed|[0-9]+ of [0-9]+ tests (failed|passed))' "$1" | tail -1
}

if [[ " $STEPS " = *" 4 "* ]]; then
  step_begin "4. Debian's autopkgtests (debian/tests) against the installed series"
  t0=$(date +%s)
  # debian/tests/control's Depends (tzdata-legacy | tzdata (<< 2023c-8):
  # Debian 12 has no tzdata-legacy, and its tzdata still has those zones)
  legacy=""; if apt-cache show tzdata-legacy >/dev/null 2>&1; then legacy=tzdata-legacy; fi
  apt_log apt-get install -y --no-install-recommends build-essential debhelper fakeroot hunspell-en-us iproute2 \
    locales-all logrotate netcat-openbsd perl postgresql-common-dev procps $legacy
  apt_update_local
  # shellcheck disable=SC2046
  apt_log apt-get install -y $(pinned "$SERIES_V" $ALL_PKGS)
  printf '%-40s %5d s\n' "deb-check: 4. test deps + all packages" $(( $(date +%s) - t0 )) >> "$TIMES"
  run_test series run-testsuite
  run_test series installcheck
  rs=$(cat "$OUT/series-run-testsuite.rc"); ri=$(cat "$OUT/series-installcheck.rc")
  say "  run-testsuite (series): exit $rs; $(summarize_testsuite "$OUT/series-run-testsuite.log")"
  say "  installcheck (series):  exit $ri; $(summarize_regress "$OUT/series-installcheck.log")"
  # a test bed that cannot run the tests fails for stock as well: that must
  # not pass as "fails under stock too"
  check "run-testsuite ran its test files" [ "$(grep -c '^### PostgreSQL test' "$OUT/series-run-testsuite.log")" -gt 0 ]
  check "installcheck ran the regression tests" [ -n "$(summarize_regress "$OUT/series-installcheck.log")" ]
  if [ "$rs" != 0 ] || [ "$ri" != 0 ]; then
    say "  failures: the failed tests again, against the stock packages ($STOCK_V)"
    # shellcheck disable=SC2046
    apt_log apt-get install -y --allow-downgrades $(pinned "$STOCK_V" $ALL_PKGS)
    if [ "$rs" != 0 ]; then
      # shellcheck disable=SC2046
      run_test stock run-testsuite $(failed_files "$OUT/series-run-testsuite.log")
      say "  run-testsuite (stock): exit $(cat "$OUT/stock-run-testsuite.rc"); $(summarize_testsuite "$OUT/stock-run-testsuite.log")"
      check "run-testsuite: every file that fails under the series fails under stock too" \
        [ "$(failed_files "$OUT/series-run-testsuite.log" | sed 's|[^ ]*/||g')" = "$(failed_files "$OUT/stock-run-testsuite.log" | sed 's|[^ ]*/||g')" ]
    fi
    if [ "$ri" != 0 ]; then
      run_test stock installcheck
      say "  installcheck (stock):  exit $(cat "$OUT/stock-installcheck.rc"); $(summarize_regress "$OUT/stock-installcheck.log")"
      check "installcheck fails under stock too" [ "$(cat "$OUT/stock-installcheck.rc")" != 0 ]
    fi
    # back to the series
    # shellcheck disable=SC2046
    apt_log apt-get install -y $(pinned "$SERIES_V" $ALL_PKGS)
  else
    pass "autopkgtests run-testsuite and installcheck"
  fi
  step_end "4. autopkgtests"
  # the test suite stopped the clusters; start ours again
  pg_ctlcluster "$MAJOR" main start 2>/dev/null || true
fi

say ""
say "install test: $ok passed, $bad failed"
[ "$bad" = 0 ]
