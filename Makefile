# The patch series' entry points.  See README.md.
# Everything that builds or runs PostgreSQL runs as an unprivileged user
# (pgbuild, created when run as root), because initdb and the test
# harness refuse to run as root.

SCRIPTS := scripts
PG_VERSION := $(shell sed -n 's/^PG_VERSION=//p' UPSTREAM)

.PHONY: demo demo-stop check check-refs each-patch fault-check ha-check abi indent deps tree export build build-release upstream upstream-check bench bench-spread bench-walpeak bench-volume bench-ddl source deb deb-check deb-source rebase help

help:
	@echo "make demo      build the patched server and run it on a demo workload"
	@echo "make demo-stop stop the demo server"
	@echo "make check     build (if needed), check the ABI (make abi) and run the test suites"
	@echo "make fault-check  stock $(PG_VERSION) and the series with the data directory on a FUSE file system"
	@echo "               that fails writes (EIO, ENOSPC), fsyncs and reads (EIO) of one table, per writer"
	@echo "               and io_method (worker, io_uring, sync); root, /dev/fuse; ~6 min (scripts/test/fault-check.sh)"
	@echo "make ha-check  three PostgreSQL nodes under Patroni (Debian's patroni, etcd): the series rolled"
	@echo "               in and back (each replica, a switchover, the old primary; a failover with"
	@echo "               pg_rewind; a node whose binaries do not start) under a write load, checked for"
	@echo "               zero loss; root; ~2-3 min (scripts/test/ha-check.sh; HA_SERIES, HA_STOCK)"
	@echo "make each-patch  build each patch alone and run its own tests; ~1 h (scripts/test/each-patch.sh)"
	@echo "make check-refs  the documents' cross-references, counts and citations hold (scripts/test/check-refs.py)"
	@echo "make abi       check that the patched server keeps stock $(PG_VERSION)'s ABI (abidiff)"
	@echo "make indent    run pgindent over the files the series changes (make check fails if it would change anything)"
	@echo "make deps      install the Debian packages for everything, benchmarks included"
	@echo "make source    fetch and verify the pinned upstream tarball into work/src"
	@echo "make tree      create/refresh work/postgresql from upstream + patches/"
	@echo "make export    regenerate patches/ from work/postgresql"
	@echo "make build     build+install the test configuration into work/inst"
	@echo "make build-release  build+install the optimized patched server into work/inst-release"
	@echo "make upstream  build+install unpatched $(PG_VERSION) into work/inst-upstream"
	@echo "make upstream-check  build+install unpatched $(PG_VERSION), test configuration, into work/inst-upstream-check"
	@echo "make bench     immediate-checkpoint, append-heavy pgbench p99, FlushBuffer-heavy pgbench"
	@echo "               and cleanup-lock (VACUUM FREEZE loop, BufferPin waits under spread checkpoints)"
	@echo "               benchmarks, patched vs upstream (BENCH_SCENARIOS=\"all random append flush cleanup\""
	@echo "               selects; see scripts/bench/bench_immediate.py, bench_append.py, bench_flush.py,"
	@echo "               bench_cleanup.py; settings: README.md, Benchmarking);"
	@echo "               the immediate checkpoints run the patched server with io_method = sync, worker"
	@echo "               and io_uring, and fio at queue depth 1 and 8 (128 kB direct writes)"
	@echo "make bench-spread  spread-checkpoint (pacing) benchmark with pgbench, plots"
	@echo "               (scripts/bench/bench_spread.py, BENCH_SPREAD_* settings)"
	@echo "make bench-walpeak  peak size of pg_wal when WAL comes fast, per pacing mode vs upstream"
	@echo "               (scripts/bench/bench_walpeak.py, BENCH_WALPEAK_* settings)"
	@echo "make bench-volume  pgbench (per-second tps, stalls, p99.9) and COPY/UPDATE/VACUUM on a"
	@echo "               loop device throttled like a cloud disk (3000 IOPS, 125 MB/s; root,"
	@echo "               cgroup v1 blkio), buffered and debug_io_direct, series vs upstream"
	@echo "               (scripts/bench/bench_volume.py, BENCH_VOLUME_* settings; BENCH_VOLUME_DIR: a real disk)"
	@echo "make bench-ddl  pgbench (tps, p99) beside a TRUNCATE loop and a CREATE/INSERT/DROP loop,"
	@echo "               and without them, series vs upstream, io_method worker; I/O workers' openat()"
	@echo "               counted with perf as root (scripts/bench/bench_ddl.py, BENCH_DDL_* settings)"
	@echo "make deb       Debian packages for Debian 12 and 13 (DEB_RELEASES=\"bookworm trixie\"; the"
	@echo "               other release in a chroot): Debian's postgresql-18 source package + the series"
	@echo "               (version <debian-version>+sortedckptN~debR) and stock; apt repositories in"
	@echo "               work/deb/RELEASE/repo (root; scripts/deb/deb-releases.sh, scripts/deb/deb.sh)"
	@echo "make deb-check install test of those packages on each release (root; CHANGES THE SYSTEM'S"
	@echo "               PACKAGES): stock -> series -> stock with a cluster, the exporter scraped,"
	@echo "               then Debian's autopkgtests (scripts/deb/deb-check.sh)"
	@echo "make deb-source  the series' Debian source package: our patches over Debian's (quilt push -a),"
	@echo "               dpkg-source -b, version ordering; about a minute (.ci/run runs it; scripts/deb/deb-source.sh)"
	@echo "make rebase VERSION=18.7-1 [TARBALL=file] [APPLY=1]  move the series to another release:"
	@echo "               3-way merge of every patch, conflicts named; APPLY=1 updates UPSTREAM (scripts/build/rebase.sh)"
	@echo "make help      this list"

check-refs:
	@python3 $(SCRIPTS)/test/check-refs.py

demo:
	@bash $(SCRIPTS)/demo/demo.sh

demo-stop:
	@bash $(SCRIPTS)/demo/demo-stop.sh

deps:
	@bash $(SCRIPTS)/build/deps.sh --bench

check:
	@bash $(SCRIPTS)/build/deps.sh
	@bash $(SCRIPTS)/test/check.sh

# Root only: root mounts faultfs (scripts/test/fault/faultfs.c) for the build
# user; the servers and the test run as the build user.  Unmounts and stops
# everything it started on any exit, ^C included.
fault-check:
	@bash $(SCRIPTS)/build/deps.sh --fault
	@bash $(SCRIPTS)/test/fault-check.sh

# Root only: installs Debian's patroni and etcd (their services kept down),
# then runs the cluster as the build user; stops everything it started on
# any exit, ^C included (scripts/test/ha-check.sh, DEBIAN.md "Patroni").
ha-check:
	@bash $(SCRIPTS)/test/ha-check.sh

# Every patch on its own: built, and its own tests run (about an hour).
each-patch:
	@bash $(SCRIPTS)/build/deps.sh
	@bash $(SCRIPTS)/test/each-patch.sh

abi:
	@bash $(SCRIPTS)/build/deps.sh
	@bash $(SCRIPTS)/test/abi.sh

indent:
	@bash $(SCRIPTS)/build/pgindent.sh

source:
	@bash $(SCRIPTS)/build/fetch-source.sh

tree:
	@bash $(SCRIPTS)/build/make-tree.sh

export:
	@bash $(SCRIPTS)/build/export-patches.sh

build:
	@bash $(SCRIPTS)/build/build.sh check

build-release:
	@bash $(SCRIPTS)/build/build.sh release

upstream:
	@bash $(SCRIPTS)/build/build.sh upstream

upstream-check:
	@bash $(SCRIPTS)/build/build.sh upstream-check

# bench_immediate.py (immediate checkpoints: scenarios "all", "random"), then
# bench_append.py (append-heavy pgbench, p99 in write phases: "append"), then
# bench_flush.py (pgbench with small shared_buffers, backends and the bgwriter
# write: "flush"), then bench_cleanup.py (a VACUUM (FREEZE) loop beside
# pgbench while spread checkpoints write, BufferPin waits sampled:
# "cleanup"); e.g. BENCH_SCENARIOS=cleanup make bench runs only the last.
bench:
	@bash $(SCRIPTS)/build/deps.sh --bench
	@bash $(SCRIPTS)/bench/bench.sh

bench-spread:
	@bash $(SCRIPTS)/build/deps.sh --bench
	@bash $(SCRIPTS)/bench/bench.sh --spread

bench-walpeak:
	@bash $(SCRIPTS)/build/deps.sh --bench
	@bash $(SCRIPTS)/bench/bench.sh --walpeak

# bench_volume.py: needs root for the loop device and its throttling (or
# BENCH_VOLUME_DIR=/an/empty/mountpoint); the benchmark itself runs as pgbuild.
bench-volume:
	@bash $(SCRIPTS)/build/deps.sh --bench
	@bash $(SCRIPTS)/bench/bench.sh --volume

# bench_ddl.py: as root it counts the server's openat() calls with perf; the
# benchmark itself runs as the build user.
bench-ddl:
	@bash $(SCRIPTS)/build/deps.sh --bench
	@bash $(SCRIPTS)/bench/bench.sh --ddl

# Debian packages for each release of DEB_RELEASES (scripts/deb/deb-releases.sh
# runs scripts/deb/deb.sh here or in a chroot; DEBIAN.md).  Not run by .ci/run.
deb:
	@bash $(SCRIPTS)/deb/deb-releases.sh deb.sh

# The packaging check of .ci/run (scripts/deb/deb-source.sh): the series' source
# package built on Debian's (quilt push -a, dpkg-source -b), and its version.
deb-source:
	@bash $(SCRIPTS)/deb/deb-source.sh

# Move the series to another release (scripts/build/rebase.sh):
#   make rebase VERSION=18.7-1 [TARBALL=/path/to/postgresql-18.7.tar.bz2] [APPLY=1]
rebase:
	@[ -n "$(VERSION)" ] || { echo "usage: make rebase VERSION=<Debian version, e.g. 18.7-1> [TARBALL=file] [APPLY=1]" >&2; exit 2; }
	@bash $(SCRIPTS)/build/rebase.sh $(VERSION) $(if $(TARBALL),--tarball $(TARBALL)) $(if $(APPLY),--apply)

# The install test (root, changes the system's packages: a throwaway machine),
# after make deb (which does nothing when the packages are current), for each
# release of DEB_RELEASES.
deb-check:
	@bash $(SCRIPTS)/deb/deb-releases.sh deb.sh deb-check.sh
