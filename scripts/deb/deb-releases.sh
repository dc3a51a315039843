#!/usr/bin/env bash
# make deb and make deb-check for each Debian release in DEB_RELEASES
# (default "bookworm trixie"):
#
#   deb-releases.sh SCRIPT...    (deb.sh; deb.sh deb-check.sh)
#
# runs the scripts in turn for each release: on this machine for its own
# release, in a chroot for the others.  The scripts build and test for the
# release they run on, in work/deb/RELEASE/ (deblib.sh).
#
# A chroot is a minimal system of Debian's archive, made with mmdebstrap
# (variant buildd; the release, its -updates and its -security suites) in
# work/deb/chroot/RELEASE, and brought up to date on each use.  The scripts
# run in it as root in a mount namespace of their own, with the repository
# bound at the same path (their output lands in work/deb/RELEASE/ here),
# /proc, /sys and /dev, and a /run and /dev/shm of its own; the build user
# has the same uid as here.  The network is this machine's: a PostgreSQL
# cluster this machine runs on the ports the install test uses (5432-5439)
# is stopped for the chroot's install test and started again after it.
#
# Root only for the chroots (mmdebstrap, mount, chroot): not as root, the
# other releases are skipped, with a note.  DEB_CHROOT_REFRESH=1 makes a
# release's chroot again from scratch.
. "$(dirname "$0")/../lib.sh"
[ $# -gt 0 ] || die "usage: $0 SCRIPT... (deb.sh, deb-check.sh)"
RELEASES=${DEB_RELEASES:-bookworm trixie}
HOST_RELEASE=$(. /etc/os-release && echo "$VERSION_CODENAME")
MIRROR=${DEB_MIRROR:-http://deb.debian.org/debian}
SECURITY_MIRROR=${DEB_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
# what the scripts read from the environment, passed into the chroot
PASS_ENV="DEB_BUILD_OPTIONS DEB_BUILD_PROFILES DEB_REBUILD DEB_FLAVOURS DEB_CHECK_STEPS DEB_PGCOMMON_VERSION
  DEBFULLNAME DEBEMAIL PG_BUILDER EXPORTER_PORT"

chroot_dir() { echo "$WORK/deb/chroot/$1"; }
# this machine's apt settings for reaching the archive (a proxy; on a mirror
# frozen in time, Check-Valid-Until "false"), for mmdebstrap and the chroot's
# apt, including the private apt configuration deb.sh uses there
machine_acquire() { apt-config dump | grep -iE '^Acquire::(Check-Valid-Until|Check-Date|https?::Proxy|Retries)( |::)' || true; }

make_chroot() {  # RELEASE
  local r=$1 ch
  ch=$(chroot_dir "$r")
  [ "$(id -u)" = 0 ] || die "building for $r on $HOST_RELEASE takes a chroot: run as root"
  if [ -n "${DEB_CHROOT_REFRESH:-}" ]; then rm -rf "$ch"; fi
  if [ ! -x "$ch/usr/bin/apt-get" ]; then
    command -v mmdebstrap >/dev/null || { apt-get update -qq; apt-get install -y -q --no-install-recommends mmdebstrap >/dev/null; }
    rm -rf "$ch.new"; mkdir -p "$(dirname "$ch")"
    local aptopt=() acq
    acq=$(machine_acquire | tr '\n' ' ')
    [ -z "$acq" ] || aptopt=(--aptopt="$acq")
    mmdebstrap --variant=buildd --mode=root "${aptopt[@]}" \
      --include=ca-certificates,debian-archive-keyring,apt-utils,fakeroot,procps,iproute2,util-linux \
      "$r" "$ch.new" \
      "deb $MIRROR $r main" "deb $MIRROR $r-updates main" "deb $SECURITY_MIRROR $r-security main" \
      > "$WORK/deb/chroot/$r.mmdebstrap.log" 2>&1 ||
      { tail -20 "$WORK/deb/chroot/$r.mmdebstrap.log" >&2; die "mmdebstrap $r failed (log: $WORK/deb/chroot/$r.mmdebstrap.log)"; }
    mv "$ch.new" "$ch"
  fi
  cp /etc/resolv.conf "$ch/etc/resolv.conf"
  machine_acquire > "$ch/etc/apt/apt.conf.d/99this-machine"
  # the build user, with this machine's uid: it owns work/deb/RELEASE on
  # both sides of the bind mount
  ensure_builder
  local uid
  uid=$(id -u "$BUILDER")
  chroot "$ch" id "$BUILDER" >/dev/null 2>&1 ||
    chroot "$ch" useradd --create-home --shell /bin/bash --uid "$uid" "$BUILDER"
  [ "$(chroot "$ch" id -u "$BUILDER")" = "$uid" ] ||
    die "user $BUILDER has uid $(chroot "$ch" id -u "$BUILDER") in $ch, $uid here; DEB_CHROOT_REFRESH=1 makes the chroot again"
  chroot "$ch" apt-get update -q > "$WORK/deb/chroot/$r.update.log" 2>&1 ||
    { tail -20 "$WORK/deb/chroot/$r.update.log" >&2; die "apt-get update in the $r chroot failed"; }
  chroot "$ch" env DEBIAN_FRONTEND=noninteractive apt-get -y -q \
    -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold upgrade > "$WORK/deb/chroot/$r.upgrade.log" 2>&1 ||
    { tail -20 "$WORK/deb/chroot/$r.upgrade.log" >&2; die "apt-get upgrade in the $r chroot failed"; }
}

# the host's clusters on the install test's ports (postgresql-common's test
# suite uses 5432 and up), stopped around the chroot's install test
HOST_STOPPED=()
stop_host_clusters() {
  command -v pg_lsclusters >/dev/null || return 0
  local v c port st
  while read -r v c port st _; do
    if [ "$st" = online ] && [ "$port" -ge 5432 ] && [ "$port" -le 5439 ]; then
      msg "stopping this machine's cluster $v/$c (port $port) for the chroot's install test"
      pg_ctlcluster "$v" "$c" stop && HOST_STOPPED+=("$v $c")
    fi
  done < <(pg_lsclusters -h)
}
start_host_clusters() {
  local vc
  for vc in "${HOST_STOPPED[@]}"; do
    # shellcheck disable=SC2086
    pg_ctlcluster $vc start || msg "WARNING: could not start cluster $vc again"
  done
  HOST_STOPPED=()
}

in_chroot() {  # RELEASE SCRIPT
  local r=$1 script=$2 ch rc=0 envs=() v
  ch=$(chroot_dir "$r")
  for v in $PASS_ENV; do
    if [ -n "${!v+set}" ]; then envs+=("$v=${!v}"); fi
  done
  if [ "$script" = deb-check.sh ]; then
    trap start_host_clusters EXIT
    stop_host_clusters
  fi
  # shellcheck disable=SC2016
  unshare --mount --propagation private bash -euc '
    ch=$1 top=$2 work=$3; shift 3
    # the chroot'"'"'s / a mount point, as on a machine: unshare --mount
    # in it (the autopkgtests'"'"' testbed) changes the propagation of /
    mount --bind "$ch" "$ch"
    for d in "$top" "$work"; do mkdir -p "$ch$d"; mount --bind "$d" "$ch$d"; done
    mount -t proc proc "$ch/proc"
    mount --rbind /sys "$ch/sys"
    mount --rbind /dev "$ch/dev"
    mount -t tmpfs -o mode=1777 shm "$ch/dev/shm"
    mount -t tmpfs -o mode=755 run "$ch/run"
    rc=0
    chroot "$ch" "$@" || rc=$?
    # no server of the chroot outlives it
    chroot "$ch" sh -c "command -v pg_lsclusters >/dev/null || exit 0
      pg_lsclusters -h | while read -r v c _ st _; do [ \"\$st\" != online ] || pg_ctlcluster \$v \$c stop; done" || true
    exit $rc
  ' _ "$ch" "$TOP" "$WORK" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C.UTF-8 TERM="${TERM:-dumb}" \
      WORK="$WORK" "${envs[@]}" bash "$TOP/scripts/deb/$script" || rc=$?
  if [ "$script" = deb-check.sh ]; then
    start_host_clusters
    trap - EXIT
  fi
  return $rc
}

for r in $RELEASES; do
  msg "=== $r"
  if [ "$r" != "$HOST_RELEASE" ]; then
    if [ "$(id -u)" != 0 ]; then
      msg "NOTE: $r skipped: building for it takes a chroot, i.e. root (DEB_RELEASES=$HOST_RELEASE builds this machine's alone)"
      continue
    fi
    t0=$(date +%s)
    make_chroot "$r"
    mkdir -p "$WORK/deb/$r"
    printf '%-40s %5d s\n' "chroot $r (mmdebstrap, apt upgrade)" $(( $(date +%s) - t0 )) | tee -a "$WORK/deb/$r/times.txt" >&2
  fi
  for script in "$@"; do
    if [ "$r" = "$HOST_RELEASE" ]; then
      bash "$TOP/scripts/deb/$script" || die "$script failed for $r"
    else
      in_chroot "$r" "$script" || die "$script failed for $r (in the chroot $(chroot_dir "$r"))"
    fi
  done
done
