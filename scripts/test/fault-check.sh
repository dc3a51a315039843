#!/usr/bin/env bash
# make fault-check: stock 18.6 and the series with their data directory on
# a FUSE file system that fails chosen operations with real errno values
# (EIO, ENOSPC on write; EIO on fsync and on read), under io_method =
# worker, io_uring and sync.  Root only: root mounts the file system.
#
# Layout:
#   scripts/test/fault-check.sh   this driver (root): builds, mounts, runs,
#                                 cleans up
#   scripts/test/fault/faultfs.c  the FUSE passthrough file system that
#                                 fails operations (rules in a control file;
#                                 its header has the syntax), built with gcc
#                                 and pkg-config fuse3 into
#                                 work/fault/faultfs
#   scripts/test/fault/faults.pl  the TAP test, one server and one io_method
#                                 per run (PostgreSQL::Test::Cluster of that
#                                 install)
#   work/fault/run/               the last run: backing/ (what the mount
#                                 shows), mnt/ (the mount point), wal/
#                                 (pg_wal, a normal directory), log/ (server
#                                 and test logs per server and io_method),
#                                 control, hits.log (faultfs's failed
#                                 operations), results.tsv, summary.txt
#
# The mount: /dev/fuse is root's only (crw-------) on these machines, so
# libfuse, run unprivileged, cannot mount through fusermount3 (it opens
# /dev/fuse itself first and stops there).  This script does what
# fusermount3 would: as root it opens /dev/fuse, mounts it with
# user_id/group_id of the build user and default_permissions, and hands
# the descriptor to faultfs, which runs as the build user (mount point
# /dev/fd/N).  faultfs never runs as root, creates files as the build user
# (as the servers expect), and needs no allow_other (only the build user
# uses the mount; root cannot even list it).
#
# Every exit (end, error, ^C, TERM) stops the test's processes, the
# servers on the mount (by the pid in their postmaster.pid), faultfs, and
# unmounts.
#
# FAULT_SERVERS (default "stock series"), FAULT_IO_METHODS (default
# "worker io_uring sync") and FAULT_ONLY (a regexp of writer/fault, e.g.
# 'backend/write-EIO') narrow the run; FAULT_BUILD=no runs the installed
# builds as they are.
. "$(dirname "$0")/../lib.sh"

[ "$(id -u)" = 0 ] || die "make fault-check mounts a FUSE file system: run it as root"
[ -c /dev/fuse ] || die "/dev/fuse is missing (modprobe fuse)"
grep -qw fuse /proc/filesystems || modprobe fuse 2>/dev/null || true
grep -qw fuse /proc/filesystems || die "the kernel has no fuse file system"

SERVERS=${FAULT_SERVERS:-stock series}
IO_METHODS=${FAULT_IO_METHODS:-worker io_uring sync}
FDIR=$WORK/fault
RUN=$FDIR/run
MNT=$RUN/mnt
started=$(date +%s)

ensure_builder
mkdir -p "$WORK"
chown "$BUILDER": "$WORK"
runuser -u "$BUILDER" -- test -r "$TOP/UPSTREAM" ||
  die "user $BUILDER cannot read $TOP; make its parent directories world-searchable (chmod o+x) or clone elsewhere"

test_pgid=""
faultfs_pid=""

# Is the mount there?  Not mountpoint(1): root may not stat a FUSE mount
# of another user.
mounted() {
  awk -v m="$MNT" '$5 == m { found = 1 } END { exit !found }' /proc/self/mountinfo
}

# Stop what this run started, in order: the test, the servers, faultfs,
# the mount.  Safe to call more than once.
cleanup() {
  local pid i pidfile
  if [ -n "$test_pgid" ] && kill -0 -- "-$test_pgid" 2>/dev/null; then
    msg "stopping the test (process group $test_pgid)"
    kill -TERM -- "-$test_pgid" 2>/dev/null || true
    for i in $(seq 50); do kill -0 -- "-$test_pgid" 2>/dev/null || break; sleep 0.2; done
    kill -KILL -- "-$test_pgid" 2>/dev/null || true
  fi
  test_pgid=""
  # servers whose data directory is on the mount: postmaster.pid, read
  # from the backing directory (root cannot read the mount)
  if [ -d "$RUN/backing" ]; then
    while IFS= read -r pidfile; do
      pid=$(head -1 "$pidfile" 2>/dev/null || true)
      [ -n "$pid" ] && [ -d "/proc/$pid" ] || continue
      case "$(readlink "/proc/$pid/exe" 2>/dev/null)" in
        "$WORK"/inst*/bin/postgres) ;;
        *) continue;;
      esac
      msg "stopping the server of ${pidfile%/postmaster.pid} (pid $pid)"
      kill -QUIT "$pid" 2>/dev/null || true
      for i in $(seq 50); do [ -d "/proc/$pid" ] || break; sleep 0.2; done
      kill -KILL "$pid" 2>/dev/null || true
    done < <(find "$RUN/backing" -name postmaster.pid 2>/dev/null)
  fi
  # faultfs: ours, or one a killed run left (its pid file, if that pid
  # is faultfs)
  if [ -z "$faultfs_pid" ] && [ -s "$RUN/faultfs.pid" ]; then
    pid=$(cat "$RUN/faultfs.pid")
    [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$FDIR/faultfs" ] && faultfs_pid=$pid
  fi
  if [ -n "$faultfs_pid" ] && [ -d "/proc/$faultfs_pid" ]; then
    kill -TERM "$faultfs_pid" 2>/dev/null || true
    for i in $(seq 25); do [ -d "/proc/$faultfs_pid" ] || break; sleep 0.2; done
    kill -KILL "$faultfs_pid" 2>/dev/null || true
  fi
  faultfs_pid=""
  if mounted; then
    umount "$MNT" 2>/dev/null || umount -l "$MNT" ||
      printf 'ERROR: could not unmount %s\n' "$MNT" >&2
  fi
}
trap cleanup EXIT
trap 'cleanup; exit 130' INT
trap 'cleanup; exit 143' TERM HUP

# 1. the two servers (incremental) and faultfs
if [ "${FAULT_BUILD:-yes}" = no ]; then
  msg "FAULT_BUILD=no: $WORK/inst and $WORK/inst-upstream-check as they are"
else
  bash "$TOP/scripts/build/build.sh" check
  bash "$TOP/scripts/build/build.sh" upstream-check
fi
mkdir -p "$FDIR"
chown "$BUILDER": "$FDIR"
if [ ! -x "$FDIR/faultfs" ] || [ "$TOP/scripts/test/fault/faultfs.c" -nt "$FDIR/faultfs" ]; then
  msg "building faultfs ($FDIR/faultfs)"
  # shellcheck disable=SC2046
  as_builder gcc -O2 -g -Wall -Wextra -Werror -o "$FDIR/faultfs" \
    "$TOP/scripts/test/fault/faultfs.c" $(pkg-config --cflags --libs fuse3) ||
    die "could not build faultfs"
fi

# 2. a fresh run directory (what a killed run left goes first)
cleanup
rm -rf "$RUN"
as_builder mkdir -p "$RUN/backing" "$MNT" "$RUN/wal" "$RUN/log" "$RUN/scratch" "$RUN/portlock"
as_builder touch "$RUN/hits.log" "$RUN/results.tsv"

# 3. mount: root opens /dev/fuse and mounts it for the build user; faultfs
# serves it as the build user
msg "mounting faultfs at $MNT (backing directory $RUN/backing)"
exec {fuse_fd}<>/dev/fuse
mount -i -t fuse.faultfs \
  -o "fd=$fuse_fd,rootmode=40000,user_id=$(id -u "$BUILDER"),group_id=$(id -g "$BUILDER"),default_permissions" \
  faultfs "$MNT" || die "could not mount $MNT"
# (a session of its own: ^C must not stop it before the servers on it)
setsid runuser -u "$BUILDER" -- sh -c 'echo $$ > "$1"; shift; exec "$@"' sh "$RUN/faultfs.pid" \
  "$FDIR/faultfs" --backing="$RUN/backing" --control="$RUN/control" --log="$RUN/hits.log" \
  -f "/dev/fd/$fuse_fd" 2>"$RUN/faultfs.stderr" &
exec {fuse_fd}<&-
for i in $(seq 100); do
  [ -s "$RUN/faultfs.pid" ] && runuser -u "$BUILDER" -- test -d "$MNT/." && break
  sleep 0.1
done
faultfs_pid=$(cat "$RUN/faultfs.pid" 2>/dev/null || true)
[ -n "$faultfs_pid" ] && runuser -u "$BUILDER" -- stat -f -c %T "$MNT" >/dev/null ||
  { cat "$RUN/faultfs.stderr" >&2; die "faultfs did not start"; }

# 4. one TAP run per server and io_method
install_of() {
  case "$1" in
    stock) build_config upstream-check;;
    series) build_config check;;
    *) die "unknown server '$1' (stock, series)";;
  esac
  echo "$PREFIX"
}

rc=0
for server in $SERVERS; do
  inst=$(install_of "$server")
  pkglib=$("$inst/bin/pg_config" --pkglibdir)
  for io in $IO_METHODS; do
    name=${server}_$io
    msg "$server, io_method = $io"
    t0=$(date +%s)
    as_builder mkdir -p "$MNT/$name" "$RUN/log/$name"
    setsid runuser -u "$BUILDER" -- env -i \
      PATH="$PATH" HOME="/home/$BUILDER" LANG=C.UTF-8 \
      PERL5LIB="$pkglib/pgxs/src/test/perl" \
      PG_REGRESS="$pkglib/pgxs/src/test/regress/pg_regress" \
      TESTDATADIR="$MNT/$name" TESTLOGDIR="$RUN/log/$name" \
      PG_TEST_PORT_DIR="$RUN/portlock" PG_TEST_TIMEOUT_DEFAULT="${PG_TEST_TIMEOUT_DEFAULT:-60}" \
      FAULT_SERVER="$server" FAULT_INSTALL="$inst" FAULT_IO_METHOD="$io" \
      FAULT_MOUNT="$MNT" FAULT_CONTROL="$RUN/control" FAULT_HITS="$RUN/hits.log" \
      FAULT_WALDIR="$RUN/wal" FAULT_SCRATCH="$RUN/scratch" FAULT_RESULTS="$RUN/results.tsv" \
      ${FAULT_ONLY:+FAULT_ONLY="$FAULT_ONLY"} \
      bash -c 'ulimit -c 0; cd "$TESTLOGDIR" && exec prove "$1"' prove "$TOP/scripts/test/fault/faults.pl" &
    test_pgid=$!
    set +e
    wait "$test_pgid"
    trc=$?
    set -e
    test_pgid=""
    if [ "$trc" != 0 ]; then
      rc=1
      msg "$server, io_method = $io: prove exited with $trc (log: $RUN/log/$name)"
      echo "$server, io_method = $io: the test exited with $trc before its end (log: $RUN/log/$name/regress_log_faults)" >>"$RUN/aborted.txt"
    fi
    msg "$server, io_method = $io: $(( $(date +%s) - t0 )) s"
  done
done

# 5. the summary
cleanup
{
  echo "make fault-check: $(date -u '+%Y-%m-%d %H:%M UTC'), $(( $(date +%s) - started )) s"
  echo
  printf '%-6s %-8s %-15s %-18s %s\n' server io_method writer fault result
  while IFS=$'\t' read -r server io writer fault result hit_by failed message notes; do
    printf '%-6s %-8s %-15s %-18s %s\n' "$server" "$io" "$writer" "$fault" "$result"
  done < "$RUN/results.tsv"
  echo
  echo "Messages (server, io_method, writer, fault: who got the fault; what failed; the message):"
  while IFS=$'\t' read -r server io writer fault result hit_by failed message notes; do
    case "$fault" in crash-after-write|checksums+drop) [ "$result" = pass ] && continue;; esac
    echo "$server $io $writer $fault: $result"
    echo "    fault hit by: $hit_by"
    echo "    failed:       $failed"
    echo "    message:      $message"
    [ "$notes" = "" ] || [ "$notes" = "-" ] || echo "    notes:        $notes"
  done < "$RUN/results.tsv"
  if [ -s "$RUN/aborted.txt" ]; then
    echo
    cat "$RUN/aborted.txt"
  fi
} | tee "$RUN/summary.txt"
fails=$(awk -F'\t' '$5 == "FAIL"' "$RUN/results.tsv" | wc -l)
cases=$(wc -l < "$RUN/results.tsv")
[ "$fails" = 0 ] || rc=1
[ "$cases" -gt 0 ] || rc=1
echo "fault-check: $cases checks, $fails failed, $(( $(date +%s) - started )) s (summary: $RUN/summary.txt)"
exit "$rc"
