# The patch series' entry points.  See README.md.
# Everything that builds or runs PostgreSQL runs as an unprivileged user
# (pgbuild, created when run as root), because initdb and the test
# harness refuse to run as root.

SCRIPTS := scripts

.PHONY: demo demo-stop check deps tree export build build-release upstream bench bench-spread source help

help:
	@echo "make demo      build the patched server and run it on a demo workload"
	@echo "make check     build (if needed) and run the test suites"
	@echo "make tree      create/refresh work/postgresql from upstream + patches/"
	@echo "make export    regenerate patches/ from work/postgresql"
	@echo "make build     build+install the test configuration into work/inst"
	@echo "make upstream  build+install unpatched $(shell sed -n 's/^PG_VERSION=//p' UPSTREAM) into work/inst-upstream"
	@echo "make bench     immediate-checkpoint benchmark, patched vs upstream"
	@echo "make bench-spread  spread-checkpoint (pacing) benchmark with pgbench, plots"

demo:
	@bash $(SCRIPTS)/demo.sh

demo-stop:
	@bash $(SCRIPTS)/demo-stop.sh

deps:
	@bash $(SCRIPTS)/deps.sh --bench

check:
	@bash $(SCRIPTS)/deps.sh
	@bash $(SCRIPTS)/check.sh

source:
	@bash $(SCRIPTS)/fetch-source.sh

tree:
	@bash $(SCRIPTS)/make-tree.sh

export:
	@bash $(SCRIPTS)/export-patches.sh

build:
	@bash $(SCRIPTS)/build.sh check

build-release:
	@bash $(SCRIPTS)/build.sh release

upstream:
	@bash $(SCRIPTS)/build.sh upstream

bench:
	@bash $(SCRIPTS)/deps.sh --bench
	@bash $(SCRIPTS)/bench.sh

bench-spread:
	@bash $(SCRIPTS)/deps.sh --bench
	@bash $(SCRIPTS)/bench.sh --spread
