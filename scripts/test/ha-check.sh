#!/usr/bin/env bash
# make ha-check: roll the series into a running three-node Patroni cluster
# and back, under a write load that never stops (DEBIAN.md, "Patroni").
# Root: it installs Debian's patroni (12: 3.0.2), python3-etcd, etcd-server
# and etcd-client (3.4) with --no-install-recommends, under a policy-rc.d
# that keeps their init scripts from starting the packaged services, then
# runs everything as the build user: scripts/test/ha_check.py (its
# docstring has the steps and the checks) with Debian's /usr/bin/python3.
#
# The nodes: 3 Patroni processes on 127.0.0.1 (PostgreSQL 6471-6473, REST
# 8471-8473), one etcd member (2479 clients, 2480 peers), each node with its
# own data, log and socket directory and a bin_dir that is a symlink to one
# of two installation trees built from the same tarball:
#   HA_SERIES  the series    default work/inst (make check's build)
#   HA_STOCK   stock 18.6    default work/inst-upstream-check (same options)
# The defaults are built (scripts/build/build.sh check, upstream-check) when
# missing; trees given explicitly are used as they are (read only), e.g.
#   HA_SERIES=work/inst-release HA_STOCK=work/inst-upstream make ha-check
# HA_BUILDS=deb (nodes from the Debian packages make deb builds, unpacked
# with dpkg -x) is not implemented: see DEBIAN.md.
#
# Other settings: HA_RATE (commits/s of the load, default 20), HA_TTL (20),
# HA_LOOP_WAIT (5), HA_NICE (niceness of everything it starts, default 10),
# HA_FAILOVER (crash, default; restart and stop show two faults of patroni
# 3.0.2: ha_check.py, failover_rewind()), HA_KEEP=1 (keep the data
# directories), HA_STOP_AFTER=N (stop after step N), HA_MEASURE=1 (the
# switchover measurement on throttled loop devices instead of the
# functional check: ha_check.py, measure(); HA_MEASURE_SQL for another
# dirty set; DEBIAN.md, "Patroni").
#
# Output: work/ha/run/ (summary.txt, results.tsv, load/, per node
# patroni.log and pglog/postgresql.log).  Every exit (end, error, ^C,
# TERM) stops what the run started, by the pids it recorded, and removes
# the data and temporary directories; it then checks that no process of the
# run is left and that its ports are free.
. "$(dirname "$0")/../lib.sh"

[ "$(id -u)" = 0 ] || die "make ha-check installs Debian packages (patroni, etcd): run it as root"
HA=$WORK/ha
RUN=$HA/run
PORTS="6471 6472 6473 8471 8472 8473 2479 2480"
started=$(date +%s)
trap 'exit 130' INT
trap 'exit 143' TERM HUP

case "${HA_BUILDS:-src}" in
  src) ;;
  deb) die "HA_BUILDS=deb is not implemented (DEBIAN.md, \"Patroni\"): use the source-built pair (HA_SERIES, HA_STOCK)";;
  *) die "HA_BUILDS: src (default) or deb";;
esac

# ------------------------------------------------------------------ packages
# etcd-server's and patroni's postinst start their services through
# invoke-rc.d (and fail the install if the start fails: patroni's init
# script exits 1 without /etc/patroni/postgres.yml).  A policy-rc.d that
# denies exactly those two takes the place of the system's for the install
# (put back right after, and on any exit).
PKGS="patroni python3-etcd etcd-server etcd-client"
POLICY=/usr/sbin/policy-rc.d
restore_policy() {
  if [ -f "$POLICY.ha-check" ]; then mv -f "$POLICY.ha-check" "$POLICY"; fi
  if [ -f "$POLICY.ha-check-none" ]; then rm -f "$POLICY" "$POLICY.ha-check-none"; fi
}
missing=""
for p in $PKGS; do
  [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" = "install ok installed" ] || missing="$missing $p"
done
if [ -n "$missing" ]; then
  msg "installing:$missing (--no-install-recommends; their services kept from starting)"
  trap restore_policy EXIT
  if [ -f "$POLICY" ]; then cp -p "$POLICY" "$POLICY.ha-check"; else touch "$POLICY.ha-check-none"; fi
  cat > "$POLICY" <<'EOF'
#!/bin/sh
# make ha-check (temporary): the packaged etcd and patroni services stay down
case "$1" in etcd|patroni) exit 101;; esac
[ -x /usr/sbin/policy-rc.d.ha-check ] && exec /usr/sbin/policy-rc.d.ha-check "$@"
exit 0
EOF
  chmod 755 "$POLICY"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # shellcheck disable=SC2086
  apt-get install -y -qq --no-install-recommends $missing >/dev/null || die "apt-get install$missing failed"
  restore_policy
  trap - EXIT
fi
msg "patroni $(dpkg-query -W -f='${Version}' patroni), etcd-server $(dpkg-query -W -f='${Version}' etcd-server), python3-etcd $(dpkg-query -W -f='${Version}' python3-etcd)"

# ------------------------------------------------------------------ the trees
ensure_builder
mkdir -p "$WORK"
chown "$BUILDER": "$WORK"
runuser -u "$BUILDER" -- test -r "$TOP/UPSTREAM" ||
  die "user $BUILDER cannot read $TOP; make its parent directories world-searchable (chmod o+x) or clone elsewhere"
tree() {  # $1: variable, $2: build configuration of its default
  local var=$1 cfg=$2 dir
  dir=${!var:-}
  if [ -z "$dir" ]; then
    build_config "$cfg"; dir=$PREFIX
    [ -x "$dir/bin/postgres" ] || bash "$TOP/scripts/build/build.sh" "$cfg" >&2
  fi
  dir=$(cd "$dir" 2>/dev/null && pwd) || die "$var: ${!var} does not exist"
  [ -x "$dir/bin/postgres" ] || die "$var: $dir/bin/postgres missing"
  runuser -u "$BUILDER" -- test -x "$dir/bin/postgres" || die "$var: $BUILDER cannot run $dir/bin/postgres"
  echo "$dir"
}
HA_SERIES=$(tree HA_SERIES check)
HA_STOCK=$(tree HA_STOCK upstream-check)
[ "$HA_SERIES" != "$HA_STOCK" ] || die "HA_SERIES and HA_STOCK are the same tree"
has_sort() { runuser -u "$BUILDER" -- "$1/bin/postgres" --describe-config 2>/dev/null | grep '^checkpoint_sort' >/dev/null; }
has_sort "$HA_SERIES" || die "HA_SERIES: $HA_SERIES/bin/postgres has no checkpoint_sort: not the series"
! has_sort "$HA_STOCK" || die "HA_STOCK: $HA_STOCK/bin/postgres has checkpoint_sort: not stock"
msg "series: $HA_SERIES ($("$HA_SERIES/bin/postgres" -V))"
msg "stock:  $HA_STOCK ($("$HA_STOCK/bin/postgres" -V))"

# ------------------------------------------------------------------ cleanup
# What this run (or a killed earlier one) started, by the pid files
# ha_check.py writes (run/pids/NAME.pid) and the postmaster.pid of each
# node, each checked against its command line before it is signalled.
py_pid=""
ours() {  # $1: pid, $2: a string its command line must contain
  [ -r "/proc/$1/cmdline" ] && tr '\0' ' ' < "/proc/$1/cmdline" | grep -qF -- "$2"
}
stop_pid() {  # $1: pid, $2: signal, $3: seconds before SIGKILL
  local i
  kill -CONT "$1" 2>/dev/null || true
  kill -"$2" "$1" 2>/dev/null || true
  for i in $(seq $(( $3 * 5 ))); do [ -d "/proc/$1" ] || return 0; sleep 0.2; done
  kill -KILL "$1" 2>/dev/null || true
}
cleanup_leftovers() {
  local f pid name d
  if [ -d "$RUN/pids" ]; then
    for f in "$RUN"/pids/*.pid; do
      [ -e "$f" ] || continue
      pid=$(cat "$f"); name=$(basename "$f" .pid)
      case "$name" in
        etcd) ours "$pid" "$RUN/etcd" && { msg "stopping etcd ($pid), left by a run"; stop_pid "$pid" TERM 10; };;
        load) ours "$pid" "ha_check.py load" && { msg "stopping the load ($pid), left by a run"; stop_pid "$pid" TERM 10; };;
        n[0-9]) ours "$pid" "/usr/bin/patroni" && { msg "stopping $name's Patroni ($pid), left by a run"; stop_pid "$pid" TERM 40; };;
      esac
      rm -f "$f"
    done
  fi
  for d in "$RUN"/n[0-9]/data "$HA"/measure/mnt/n[0-9]/data; do
    [ -f "$d/postmaster.pid" ] || continue
    pid=$(head -1 "$d/postmaster.pid")
    [ -n "$pid" ] && ours "$pid" "$d" || continue
    msg "stopping the postmaster of $d ($pid), left by a run"
    stop_pid "$pid" QUIT 10
  done
  if [ -f "$RUN/tmpdir" ]; then
    d=$(cat "$RUN/tmpdir")
    case "$d" in /tmp/ha-check.*) rm -rf "$d";; esac
    rm -f "$RUN/tmpdir"
  fi
  if [ "${HA_KEEP:-}" != 1 ]; then rm -rf "$RUN"/n[0-9]/data "$RUN/etcd"; fi
}
busy_ports() {
  local p out=""
  for p in $PORTS; do
    ss -Hltn "sport = :$p" 2>/dev/null | grep -q . && out="$out $p"
  done
  echo "$out"
}
measure_down() { :; }
on_exit() {
  local rc=$?
  trap - EXIT INT TERM HUP
  set +e
  if [ -n "$py_pid" ] && kill -0 "$py_pid" 2>/dev/null; then
    msg "stopping ha_check.py (session $py_pid)"
    kill -TERM -- "-$py_pid" 2>/dev/null || true
    for _ in $(seq 150); do kill -0 "$py_pid" 2>/dev/null || break; sleep 0.5; done
  fi
  cleanup_leftovers
  measure_down
  # what is left of this run: processes recorded anywhere, ports
  local left busy
  left=$(for d in "$RUN"/n[0-9]/data "$HA"/measure/mnt/n[0-9]/data; do [ -f "$d/postmaster.pid" ] && head -1 "$d/postmaster.pid"; done 2>/dev/null |
         while read -r pid; do [ -d "/proc/$pid" ] && echo "$pid"; done | tr '\n' ' ')
  busy=$(busy_ports)
  if [ -n "$left$busy" ]; then
    printf 'ERROR: ha-check left processes (%s) or ports in use (%s)\n' "$left" "$busy" >&2
    [ "$rc" != 0 ] || rc=1
  else
    msg "cleaned up: no process of the run left, ports$(echo " $PORTS" | sed 's/ /,/g;s/^,/ /') free"
  fi
  msg "make ha-check: $(( $(date +%s) - started )) s, exit $rc"
  exit "$rc"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

mkdir -p "$HA"
chown "$BUILDER": "$HA"
cleanup_leftovers
b=$(busy_ports)
[ -z "$b" ] || die "ports in use:$b (ha-check needs $PORTS on 127.0.0.1)"
rm -rf "$RUN"
runuser -u "$BUILDER" -- mkdir -p "$RUN"

# ------------------------------------------------------------ measurement
# HA_MEASURE=1: one ext4 loop device per node (HA_MEASURE_GB, default 4),
# throttled like bench-volume's "cloud" disk (HA_MEASURE_PROFILE, default
# 3000 IOPS and 125 MB/s, in the root blkio cgroup, cgroup v1), mounted at
# work/ha/measure/mnt/nN for the build user; torn down on any exit.
MEAS=$HA/measure
declare -A LOOPDEV=()
if [ "${HA_MEASURE:-}" = 1 ]; then
  BLKIO=/sys/fs/cgroup/blkio
  prof=${HA_MEASURE_PROFILE:-3000:125}
  iops=${prof%%:*}; mbps=${prof##*:}
  [ -e /dev/loop-control ] || die "HA_MEASURE: no loop devices (/dev/loop-control)"
  command -v mkfs.ext4 >/dev/null && command -v losetup >/dev/null || die "HA_MEASURE: needs e2fsprogs and util-linux (make deps)"
  [ -w "$BLKIO/blkio.throttle.write_iops_device" ] || die "HA_MEASURE: no cgroup v1 blkio throttling at $BLKIO"
  throttle() {  # $1: major:minor, $2: iops (0: none), $3: MB/s (0: none)
    echo "$1 $2" > "$BLKIO/blkio.throttle.write_iops_device"
    echo "$1 $2" > "$BLKIO/blkio.throttle.read_iops_device"
    echo "$1 $(( $3 * 1000000 ))" > "$BLKIO/blkio.throttle.write_bps_device"
    echo "$1 $(( $3 * 1000000 ))" > "$BLKIO/blkio.throttle.read_bps_device"
  }
  measure_down() {
    local n dev
    for n in n1 n2 n3; do
      mountpoint -q "$MEAS/mnt/$n" && { umount "$MEAS/mnt/$n" || umount -l "$MEAS/mnt/$n"; }
      dev=${LOOPDEV[$n]:-}
      [ -n "$dev" ] || dev=$(losetup -j "$MEAS/$n.img" 2>/dev/null | cut -d: -f1)
      if [ -n "$dev" ]; then
        throttle "$(lsblk -dno MAJ:MIN "$dev" | tr -d ' ')" 0 0 2>/dev/null || true
        losetup -d "$dev" || true
      fi
      rm -f "$MEAS/$n.img"
    done
  }
  measure_down
  mkdir -p "$MEAS/mnt"
  for n in n1 n2 n3; do
    truncate -s "${HA_MEASURE_GB:-4}G" "$MEAS/$n.img"
    LOOPDEV[$n]=$(losetup --direct-io=on --find --show "$MEAS/$n.img")
    mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "${LOOPDEV[$n]}"
    mkdir -p "$MEAS/mnt/$n"
    mount -o noatime "${LOOPDEV[$n]}" "$MEAS/mnt/$n"
    chown "$BUILDER": "$MEAS/mnt/$n"
    throttle "$(lsblk -dno MAJ:MIN "${LOOPDEV[$n]}" | tr -d ' ')" "$iops" "$mbps"
    msg "HA_MEASURE: $n on ${LOOPDEV[$n]} ($MEAS/mnt/$n), $iops IOPS, $mbps MB/s"
  done
  export HA_MEASURE_MNT=$MEAS/mnt
fi

# ------------------------------------------------------------------ the run
# In a session of its own, as the build user: ^C reaches this script, which
# hands it on as SIGINT to the session (ha_check.py then stops everything in
# order and prints the summary); Patroni, etcd and the load run in sessions
# of their own and are stopped by ha_check.py, or from their pid files here.
envs=(PATH="$PATH" HOME="$(getent passwd "$BUILDER" | cut -d: -f6)" LANG=C.UTF-8
      HA_SERIES="$HA_SERIES" HA_STOCK="$HA_STOCK" HA_DIR="$HA")
while IFS='=' read -r k v; do
  case "$k" in HA_SERIES|HA_STOCK|HA_DIR|HA_NICE|HA_BUILDS) ;; HA_*) envs+=("$k=$v");; esac
done < <(env)
interrupted=""
forward() {
  interrupted=$1
  msg "SIG$1: stopping the run (ha_check.py cleans up and prints the summary)"
  [ -n "$py_pid" ] && kill -INT -- "-$py_pid" 2>/dev/null || true
}
trap 'forward INT' INT
trap 'forward TERM' TERM HUP
args=()
[ "${HA_MEASURE:-}" != 1 ] || args=(measure)
setsid runuser -u "$BUILDER" -- env -i "${envs[@]}" nice -n "${HA_NICE:-10}" \
  /usr/bin/python3 "$TOP/scripts/test/ha_check.py" "${args[@]}" &
py_pid=$!
rc=0
while :; do
  set +e; wait "$py_pid"; rc=$?; set -e
  kill -0 "$py_pid" 2>/dev/null || break
done
# the session's other processes (runuser's child, if runuser went first)
for _ in $(seq 120); do pgrep -s "$py_pid" >/dev/null || break; sleep 0.5; done
py_pid=""
trap 'exit 130' INT
trap 'exit 143' TERM HUP
if [ -n "$interrupted" ]; then
  msg "interrupted (SIG$interrupted)"
  rc=130
fi
exit "$rc"
