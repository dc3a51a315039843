#!/usr/bin/env bash
# Install the Debian packages needed to build, test, demo and benchmark.
# As root: apt-get installs what is missing.  Otherwise: print the exact
# command and fail, so that nothing half-works later.
. "$(dirname "$0")/../lib.sh"

PKGS="build-essential meson ninja-build bison flex pkg-config ccache perl
libipc-run-perl libreadline-dev zlib1g-dev libicu-dev liblz4-dev libzstd-dev
bzip2 xz-utils ca-certificates apt git fio gnuplot-nox python3
libxml2-utils xsltproc docbook-xml abigail-tools liburing-dev
e2fsprogs util-linux fuse3 libfuse3-dev"
# fio, gnuplot, and mkfs.ext4 and losetup (bench_volume.py's loop device):
# only for the benchmarks (--bench: everything).  fuse3 and libfuse3-dev
# (faultfs, scripts/test/fault-check.sh): only for make fault-check (--fault).
case "${1:-}" in
  --bench) ;;
  --fault) PKGS=$(echo $PKGS | tr ' ' '\n' | grep -vxE 'fio|gnuplot-nox|e2fsprogs' | tr '\n' ' ');;
  *) PKGS=$(echo $PKGS | tr ' ' '\n' | grep -vxE 'fio|gnuplot-nox|e2fsprogs|util-linux|fuse3|libfuse3-dev' | tr '\n' ' ');;
esac

missing=""
for p in $PKGS; do
  st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [ "$st" = "install ok installed" ] || missing="$missing $p"
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" != 0 ]; then
  echo "Missing Debian packages. Install them with:" >&2
  echo "  sudo apt-get update && sudo apt-get install -y$missing" >&2
  exit 1
fi
msg "installing:$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
