#!/usr/bin/python3
"""Unpatched 18.6 and the series on a throttled "cloud-like" volume: pgbench
with spread checkpoints (per-second tps, stalls, latency percentiles) and
bulk COPY / UPDATE / VACUUM, buffered and with debug_io_direct = data.

The volume (BENCH_VOLUME_DIR and BENCH_VOLUME_DEVICE unset; needs root and
cgroup v1 blkio): a sparse image of BENCH_VOLUME_IMAGE_GB GB under
work/bench/volume/, attached with `losetup --direct-io=on`, ext4 (mkfs -q,
no lazy init), mounted at work/bench/volume/mnt and owned by the build user
(pgbuild); reads and writes of the loop device throttled to the IOPS and
MB/s (10^6 bytes) of BENCH_VOLUME_PROFILE: "cloud" 3000 IOPS, 125 MB/s;
"small" 1000 IOPS, 60 MB/s; "IOPS:MBPS" (e.g. "16000:1000"); "none".  The
limits are set in the ROOT blkio cgroup (blkio.throttle.{read,write}_
{iops,bps}_device of /sys/fs/cgroup/blkio, for the loop device's major:minor;
they apply to that device only) and the benchmark joins the root cgroup: a
child cgroup (pgbench_volume) would throttle only the benchmark's direct
I/O, not buffered writes, which the kernel's writeback threads (root cgroup)
issue -- cgroup v1 has no writeback attribution, and its throttling is
flat here (measured: 1 GB written buffered, then fsync'ed, from a child
cgroup limited to 125 MB/s ran at 729 MB/s).  Before the benchmark, a check
writes for 5 s each with 8 kB and 128 kB direct writes (fio at queue depth 1
if installed, else dd) and 640 MB buffered then fsync'ed (dd), before and
after throttling; the MB/s show that the volume behaves like a cloud disk
(cloud: ~24 MB/s at 8 kB, i.e. 3000 IOPS; ~125 MB/s at 128 kB and buffered).
At the end, also on an error, ^C or SIGTERM: the servers are stopped, the
volume unmounted, the limits removed, the loop device detached and the image
deleted.  BENCH_VOLUME_DIR=/an/empty/mountpoint (a DBA's real disk) runs on
that directory as it is (no loop device, no throttling, root only to chown
it to pgbuild if pgbuild cannot write there; only lost+found and our own
data-* directories may be in it; they are removed at the end).
BENCH_VOLUME_DEVICE=/dev/xxx makes an ext4 on that block device, mounted at
work/bench/volume/mnt, unthrottled: it DESTROYS what is on it and is refused
unless BENCH_VOLUME_DEVICE_OK=yes.

Clusters: "upstream" (work/inst-upstream) and "series" (work/inst-release),
each with its own data directory on the volume, data and WAL both there,
data checksums on, autovacuum off (the pgbench tables are vacuumed before
every run instead), checkpoint_timeout BENCH_VOLUME_CHECKPOINT_TIMEOUT,
checkpoint_completion_target 0.9, log_checkpoints on; server logs under
work/bench/volume/ (not throttled).  One server runs at a time, restarted
for every run with the run's settings (shared_buffers, the variant's).
Ports BENCH_PORT + 60 (upstream) and + 61 (series).

Scenario "pgbench": pgbench -i -s BENCH_VOLUME_SCALE, once per cluster;
max_wal_size BENCH_VOLUME_MAX_WAL (large: checkpoints come by time).
shared_buffers per BENCH_VOLUME_SB: "small" 256MB (less than the data: the
main case), "large" 2GB (more).  A run: start the server; TRUNCATE
pgbench_history, VACUUM the other pgbench tables, CHECKPOINT; pg_prewarm of
the pgbench tables and indexes (buffered I/O: the kernel's page cache gets
them all, as after a run; shared_buffers what fits); BENCH_VOLUME_WARMUP s of
the workload; CHECKPOINT (every run starts alike: the next timed checkpoint
comes BENCH_VOLUME_CHECKPOINT_TIMEOUT later); pg_stat_reset_shared('io');
BENCH_VOLUME_SECONDS s of pgbench -M prepared -c BENCH_VOLUME_CLIENTS -j 2
-P 1 -l (every transaction logged, under work/bench/volume/, deleted once
read); stop the server.  Per run: mean and median of the per-second tps
(-P 1), p5 of it, stall seconds (seconds with tps below 1/10 of the run's
median), transaction latency p99, p99.9 and max; the timed checkpoints that
completed in the run, with the median of their write and sync times (from
their "checkpoint complete" lines); pg_stat_io (object relation, context
normal) writes and write_bytes of the client backends, the background writer
and the checkpointer (blocks per write = write_bytes / writes / 8192); the
device's MB/s and IOPS written and MB/s read (blkio statistics of the loop
device; none for BENCH_VOLUME_DIR/DEVICE); the CPU share of the server and
pgbench, and of anything else (other_cpu: a noisy run).
Variants (BENCH_VOLUME_VARIANTS): "upstream" or "series" (or "prev": the
build in BENCH_PREV_INSTALL, a previous version of the series), optionally with
settings: "series:debug_io_direct=data", "upstream:backend_flush_after=
256kB", "series:a=1,b=2".  BENCH_SETTINGS (README.md) entries for
"upstream" or "series" apply to every variant of that build.  Settings
named vm.* are the kernel's (/proc/sys/vm; integers), set for the
variant's runs only, e.g. "series:vm.dirty_background_bytes=33554432" (as
root: the benchmark asks the root process through two files in
work/bench/volume/; before every other run, and at the end, also on an
error or ^C, the original values are back; of a pair *_bytes / *_ratio the
one in use).  Runs are interleaved: run k runs every variant, in the
listed order rotated by k - 1.
Table per shared_buffers size: medians over the runs, the mean tps run by
run; "x upstr" = median of the ratios, within a run, of the mean tps to
upstream's (buffered), "x same" = to the upstream variant with the same
settings.  A variant without settings of its own is named "(defaults)":
"series (defaults)" is the series as a DBA leaves postgresql.conf (with
the run's shared_buffers, max_wal_size and checkpoint_timeout).
"Smooth without a price" (SMOOTH_TARGETS), per cadence: every buffered
series variant against the upstream variant with the same settings
("series" / "upstream": checkpoints by time; ":max_wal_size=512MB": by WAL),
a line per target with the value run by run and a verdict: no stall second
in any run; mean tps >= 1.10 x, median per-second tps >= 0.95 x and p99
latency <= 1.05 x upstream's (medians of the within-run ratios); the
longest transaction of every run under 500 ms.  With BENCH_VOLUME_SAMPLE=1
below it the device: in what share of the sampled seconds it wrote at 95%
of its IOPS limit or more, its writes per transaction, pg_stat_io's WAL
and relation writes per transaction, and (least squares over the series'
seconds) device writes per WAL write and per relation write; for a missed
tps target, the device writes per transaction it would take at the
series' IOPS.  Also: series:debug_io_direct=data >= upstream's (buffered)
mean tps, no stall second.

Scenario "probe" (not in the default): no server, only the device.  fio
writes 8 kB blocks at random offsets of a 1 GiB file, direct, one at a time
(psync), at a steady BENCH_VOLUME_PROBE_IOPS (half the cloud profile's
IOPS), for BENCH_VOLUME_PROBE_SECONDS, logging the writes completed and the
longest write of every second.  A "dip" is a second in which fewer than a
tenth of the rate completed: the device paused with nothing else queued.
Whether the seconds a pgbench run stalls, or its longest transactions,
coincide with the device's own pauses is then a matter of how often those
occur on their own.

Scenario "bulk": shared_buffers BENCH_VOLUME_BULK_SHARED_BUFFERS, max_wal_size
BENCH_VOLUME_BULK_MAX_WAL; input: a text file of BENCH_VOLUME_COPY_GB GiB
(rows "id, 0, 100 x's"), made once under work/bench/volume/ (not
throttled) and deleted at the end.  A run: start the server, CREATE TABLE t
(id int, a int, pad text), CHECKPOINT, pg_stat_reset_shared('io'); timed:
COPY t FROM the file, CHECKPOINT, UPDATE t SET a = a + 1, CHECKPOINT, VACUUM
t, CHECKPOINT; then pg_stat_io of the client backends: writes and
write_bytes in contexts bulkwrite (COPY's ring), vacuum (VACUUM's ring) and
normal (mostly the UPDATE); DROP TABLE t; stop.  Variants
(BENCH_VOLUME_BULK_VARIANTS), runs and order as above.  Table: medians of the
times and blocks per write; "x same" = median of the ratios, within a run,
to the upstream variant with the same settings (same I/O mode).  Targets:
COPY and VACUUM time, series / upstream, <= 0.3 with debug_io_direct = data,
<= 0.9 buffered.  The volume must hold the table twice (after the UPDATE:
about 2.8 x BENCH_VOLUME_COPY_GB) and the WAL of both clusters (up to
BENCH_VOLUME_BULK_MAX_WAL each).

Output: work/bench/volume-<date>.csv (pgbench: one row per run and variant),
volume-<date>-seconds.csv (per second: run, sb, variant, second, tps,
lat_ms, in_checkpoint), volume-<date>-bulk.csv (bulk: one row per run and
variant), volume-<date>.txt (the tables, also printed, with the volume and
its check), volume-<date>-<sb>.png (gnuplot: per-second tps, a panel per
variant, every run a line, run 1's checkpoints shaded).  With --table
FILE.csv (the pgbench or the bulk CSV; WORK set): print the tables again;
--replot FILE.csv: draw the PNGs again.
With BENCH_VOLUME_SAMPLE=1, every measured pgbench run is also sampled
(scripts/bench/volume_sampler.py: kernel Dirty/Writeback, cachestat(2) of the
relation files and WAL, pg_stat_io, wait events and kernel wait channels,
/proc/PID/io, the device; as root on a device with writeback throttling
also wbt's tracepoints, to volume-wbt-<date>.txt: `scripts/bench/volume_trace.py
wbt-align` that file with the sample-seconds CSV), written to
volume-<date>-sample-seconds.csv (a
row per second: run, sb, variant, t, tps and longest latency from the
pgbench -l logs, the samples) and volume-<date>-sample-checkpoints.csv (the
runs' checkpoint log lines); `scripts/bench/volume_stalls.py
volume-<date>-sample-seconds.csv [--plot]` classifies the stalls and plots
tps beside dirty and writeback MB.  Set track_io_timing and
track_wal_io_timing (BENCH_SETTINGS) for the *_ms columns.

`make bench-volume` runs this (as root: scripts/bench/bench.sh runs it as
root, it sets the volume up and runs the benchmark as pgbuild).  Full size, default
settings: about 2.5 hours.  Environment (defaults in brackets; BENCH_BUILD,
BENCH_SETTINGS and BENCH_PORT are described in README.md):
  BENCH_VOLUME_SCENARIOS ["pgbench bulk"]
  BENCH_VOLUME_PROFILE [cloud]       cloud, small, IOPS:MBPS or none
  BENCH_VOLUME_IMAGE_GB [12]         size of the image (GiB)
  BENCH_VOLUME_IMAGE [sparse]        "sparse" (truncate) or "written": zeros
      written through the whole image first (direct I/O; mkfs then without
      discards, which would punch the holes again), so that the disk below
      allocates nothing while the benchmark runs (a sparse image allocates
      where the volume first writes: new WAL segments, relation extensions;
      a cloud volume has no such step)
  BENCH_VOLUME_WBT []                the volume's writeback throttling target
      (queue/wbt_lat_usec, microseconds; 0: off; empty: the kernel's
      default, which the header of the tables reports)
  BENCH_VOLUME_WRITE_CACHE []        "off": the loop device reports no volatile
      write cache (queue/write_cache "write through"), so the kernel sends
      it no flush requests; empty: the kernel's default, a write-back cache,
      where every fsync()/fdatasync() (WAL's at each commit) adds an empty
      flush request that the IOPS limit counts like a write.  A cloud
      volume's IOPS count data writes only: "off" models that
  BENCH_VOLUME_RECLAIM []            "off": stop the host kernel's proactive
      reclaim (DAMON threads that page memory out, which evict page cache
      idle for a minute though memory is free; the header's "machine:" says
      if there is one) for the invocation, and start it again at the end;
      empty: leave it as it is
  BENCH_VOLUME_DIR []                run on this directory instead
  BENCH_VOLUME_DEVICE []             mkfs + mount this device instead
  BENCH_VOLUME_DEVICE_OK []          "yes": BENCH_VOLUME_DEVICE may be wiped
  BENCH_VOLUME_RUNS [3]              runs of every variant (both scenarios)
  BENCH_VOLUME_SCALE [50]            pgbench scale (~750 MB)
  BENCH_VOLUME_CLIENTS [8]           pgbench -c (-j 2)
  BENCH_VOLUME_SECONDS [300]         measured seconds per pgbench run
  BENCH_VOLUME_WARMUP [20]           unmeasured seconds of pgbench first
  BENCH_VOLUME_CHECKPOINT_TIMEOUT [45s]
  BENCH_VOLUME_MAX_WAL [8GB]         max_wal_size of the pgbench scenario
  BENCH_VOLUME_SB ["small"]          "small" (256MB), "large" (2GB) or both
  BENCH_VOLUME_SAMPLE []             "1": sample every pgbench run (above)
  BENCH_VOLUME_VARIANTS ["upstream series upstream:max_wal_size=512MB
      series:max_wal_size=512MB series:debug_io_direct=data"]
  BENCH_VOLUME_COPY_GB [2]           size of the COPY input (GiB; 0.2: quick)
  BENCH_VOLUME_BULK_SHARED_BUFFERS [128MB]
  BENCH_VOLUME_BULK_MAX_WAL [2GB]
  BENCH_VOLUME_BULK_VARIANTS ["upstream upstream:debug_io_direct=data series
      series:debug_io_direct=data"]
  BENCH_VOLUME_BULK_STEPS ["copy update vacuum"]   the statements run (in
      this order; UPDATE and VACUUM need the COPY's table)
  BENCH_VOLUME_PROBE_IOPS [1500]     rate of the probe's writes (0: as fast as
      the device takes them, i.e. at its limit)
  BENCH_VOLUME_PROBE_SECONDS [900]   length of the probe
  BENCH_VOLUME_PROBE_BS [8k]         size of the probe's writes
  BENCH_VOLUME_PROBE_DEPTH [1]       writes in flight (libaio above 1)
  BENCH_VOLUME_PROBE_FSYNC [0]       fsync after every N writes (0: never), as
      WAL's flushes do (a flush of the loop device is an fsync of its image)
"""

import contextlib
import json
import os
import pwd
import re
import shutil
import signal
import stat
import statistics
import subprocess
import sys
import threading
import time

import benchlib
import volume_sampler
from benchlib import fmt, med

OUT = benchlib.bench_dir("volume")
MNT = os.path.join(OUT, "mnt")
IMAGE = os.path.join(OUT, "volume.img")
BLKIO = "/sys/fs/cgroup/blkio"
THROTTLE_FILES = ("write_iops", "write_bps", "read_iops", "read_bps")
(SCENARIOS, PROFILE, IMAGE_GB, DIR, DEVICE, DEVICE_OK, RUNS, SCALE, CLIENTS, SECONDS, WARMUP,
 CHECKPOINT_TIMEOUT, MAX_WAL, SBS, VARIANTS, COPY_GB, BULK_SHARED_BUFFERS, BULK_MAX_WAL,
 BULK_VARIANTS, BULK_STEPS, SAMPLE, PROBE_IOPS, PROBE_SECONDS, PROBE_BS,
 PROBE_DEPTH, PROBE_FSYNC, IMAGE_KIND, WBT, RECLAIM, WRITE_CACHE) = benchlib.settings(
    "BENCH_VOLUME", SCENARIOS=["pgbench", "bulk"], PROFILE="cloud", IMAGE_GB=12, DIR="",
    DEVICE="", DEVICE_OK="", RUNS=3, SCALE=50, CLIENTS=8, SECONDS=300, WARMUP=20,
    CHECKPOINT_TIMEOUT="45s", MAX_WAL="8GB", SB=["small"],
    VARIANTS=["upstream", "series", "upstream:max_wal_size=512MB", "series:max_wal_size=512MB",
              "series:debug_io_direct=data"],
    COPY_GB=2.0, BULK_SHARED_BUFFERS="128MB", BULK_MAX_WAL="2GB",
    BULK_VARIANTS=["upstream", "upstream:debug_io_direct=data", "series",
                   "series:debug_io_direct=data"], BULK_STEPS=["copy", "update", "vacuum"],
    SAMPLE="", PROBE_IOPS=1500, PROBE_SECONDS=900, PROBE_BS="8k", PROBE_DEPTH=1,
    PROBE_FSYNC=0, IMAGE="sparse", WBT="", RECLAIM="", WRITE_CACHE="")
PROFILES = {"cloud": (3000, 125), "small": (1000, 60)}
SB_SIZES = {"small": "256MB", "large": "2GB"}
BUILDS = {"upstream": "inst-upstream", "series": "inst-release"}
if os.environ.get("BENCH_PREV_INSTALL"):
    # "prev" variants: a previous build of the series (README.md)
    BUILDS["prev"] = os.path.abspath(os.environ["BENCH_PREV_INSTALL"])
BUILDER = os.environ.get("PG_BUILDER", "pgbuild")
CHECK_S = 5             # seconds of each direct-write check
CHECK_BUFFERED_MB = 640     # MB of the buffered-write check
STALL = 0.1             # a second below this share of the run's median tps stalls
PGBENCH = benchlib.pgbench_args(CLIENTS, min(2, CLIENTS))
WRITERS = {"client backend": "backend", "background writer": "bgwriter",
           "checkpointer": "ckpt"}
FIELDS = (["run", "sb", "variant", "mean_tps", "median_tps", "p5_tps", "stall_s", "lat_p99_ms",
           "lat_p999_ms", "lat_max_ms", "lat_p99_time_ms", "transactions", "checkpoints",
           "ckpt_write_s",
           "ckpt_sync_s"] +
          [f"{p}_{k}" for p in WRITERS.values() for k in ("writes", "write_bytes")] +
          ["dev_write_mb_s", "dev_write_iops", "dev_read_mb_s", "cpu", "other_cpu"])
SECOND_FIELDS = ["run", "sb", "variant", "second", "tps", "lat_ms", "in_checkpoint"]
BULK_CONTEXTS = ("bulkwrite", "vacuum", "normal")
BULK_FIELDS = (["run", "variant", "copy_s", "copy_ckpt_s", "update_s", "update_ckpt_s",
                "vacuum_s", "vacuum_ckpt_s", "table_mb"] +
               [f"{x}_{k}" for x in BULK_CONTEXTS for k in ("writes", "write_bytes")] +
               ["dev_write_mb", "dev_writes"] +
               [f"{x}_{k}" for x in ("copy", "update", "vacuum")
                for k in ("dev_mb", "ckpts", "fsyncs", "bgw_blocks", "ckpt_blocks", "writebacks")])
# (variant, base, mean tps >= this x base's, no stall second in any run,
# longest transaction below this many ms in every run or None): the series
# with direct I/O against buffered 18.6
TARGETS_PGBENCH = (("series:debug_io_direct=data", "upstream", 1.0, True, None),)
# Smooth without a price: every buffered series variant against the upstream
# variant with the same settings ("series" vs "upstream": checkpoints by
# time; "series:max_wal_size=512MB" vs "upstream:max_wal_size=512MB": by
# WAL), over the runs of one invocation.  (name, column, how, bound): "max"
# = the largest value of any run of the series must be <= (stall seconds) or
# < (longest transaction) the bound; "ratio >=" / "ratio <=" = the median of
# the within-run ratios series / upstream.
SMOOTH_TARGETS = (("stall seconds", "stall_s", "max <=", 0),
                  ("mean tps", "mean_tps", "ratio >=", 1.10),
                  ("median of per-second tps", "median_tps", "ratio >=", 0.95),
                  ("p99 latency", "lat_p99_ms", "ratio <=", 1.05),
                  ("longest transaction ms", "lat_max_ms", "max <", 500))
SATURATED = 0.95    # a second when the device wrote >= this share of its IOPS limit


def time_pct(lats, q):
    """The latency below which the clients spent the share 'q' of their time
    in transactions: each transaction weighs its own latency.  A percentile of
    the transactions (benchlib.pct()) counts a transaction that waited out a
    stall of seconds once, as one of the thousands that completed meanwhile
    in a second without one; here it weighs what the clients waited."""
    if not lats:
        return None
    lats = sorted(lats)
    total, acc = sum(lats), 0.0
    for x in lats:
        acc += x
        if acc >= q * total:
            return x
    return lats[-1]


# ---------------------------------------------------------------- variants

def build_of(variant):
    return variant.split(":", 1)[0]


def label(variant):
    """The variant as the tables name it: a build without settings of its
    own runs with the defaults ("series (defaults)")."""
    return variant + " (defaults)" if ":" not in variant else variant


def variant_settings(variant):
    """The settings of a variant ("series:a=1,b=2" -> {a: 1, b: 2}), on top
    of BENCH_SETTINGS' for its build."""
    own = {}
    if ":" in variant:
        for kv in variant.split(":", 1)[1].split(","):
            k, _, val = kv.partition("=")
            own[k.strip()] = val.strip()
    return benchlib.variant_settings(variant, explicit=own, env_of=build_of(variant))


def server_settings(variant):
    """The variant's settings but the kernel's (vm.*): the server's."""
    return {k: v for k, v in variant_settings(variant).items() if not k.startswith("vm.")}


def kernel_settings(variant):
    """The variant's vm.* settings (sysctls)."""
    return {k: v for k, v in variant_settings(variant).items() if k.startswith("vm.")}


def sysctl_variants():
    """The variants of the selected scenarios with vm.* settings."""
    return [v for v in (VARIANTS if "pgbench" in SCENARIOS else []) +
            (BULK_VARIANTS if "bulk" in SCENARIOS else []) if kernel_settings(v)]


def same_upstream(variant):
    """The upstream variant with the same settings as 'variant' ("series:X"
    -> "upstream:X"), the base of "x same"."""
    return "upstream" + variant[len(build_of(variant)):]


def check_variants(variants, var):
    benchlib.check_variants(variants, var)
    for v in variants:
        bad = build_of(v) not in BUILDS or (":" in v and not all(
            "=" in kv and kv.split("=")[0].strip() for kv in v.split(":", 1)[1].split(",")))
        if bad:
            sys.exit(f"{var}: bad variant {v!r}: \"upstream\" or \"series\" (or \"prev\" "
                     f"with BENCH_PREV_INSTALL), optionally followed by "
                     f":name=value[,name=value...]")
        for k, val in kernel_settings(v).items():
            if not SYSCTL_NAME.fullmatch(k) or not SYSCTL_VALUE.fullmatch(val) or \
                    not os.path.exists(sysctl_path(k)):
                sys.exit(f"{var}: variant {v!r}: {k}={val}: not a setting of /proc/sys/vm "
                         f"with an integer value")


def is_direct(variant):
    return "debug_io_direct" in variant_settings(variant)


# ---------------------------------------------------------------- vm.* settings of a variant

# The benchmark (the build user) asks the root process for the vm.* settings
# of a run before it starts the server (SYSCTL_REQUEST: "name=value;..."),
# and for the original values after it has stopped it ("restore"); the root
# process (sysctl_agent, a thread) answers in SYSCTL_DONE.
SYSCTL_REQUEST = os.path.join(OUT, "sysctl-request")
SYSCTL_DONE = os.path.join(OUT, "sysctl-done")
SYSCTL_NAME = re.compile(r"vm\.[a-z0-9_]+")
SYSCTL_VALUE = re.compile(r"\d+")
sysctl_last = "restore"     # the benchmark's last request


def sysctl_path(name):
    return "/proc/sys/" + name.replace(".", "/")


def sysctl_twin(name):
    """The other of a pair vm.X_bytes / vm.X_ratio (the kernel sets one to 0
    when the other is written), or None."""
    for a, b in (("_bytes", "_ratio"), ("_ratio", "_bytes")):
        if name.endswith(a) and os.path.exists(sysctl_path(name[:-len(a)] + b)):
            return name[:-len(a)] + b
    return None


def write_sysctl(name, value):
    with open(sysctl_path(name), "w") as f:
        f.write(value)


def restore_sysctls(orig, say=False):
    """Write back the values 'orig' ({name: value}) of sysctl_agent; of a
    pair *_bytes / *_ratio the one that was in use (not 0)."""
    done = set()
    for k, v in orig.items():
        if k in done:
            continue
        twin = sysctl_twin(k)
        if twin in orig:
            done.add(twin)
            if v == "0" and orig[twin] != "0":
                k, v = twin, orig[twin]
        write_sysctl(k, v)
        done.add(k)
        if say:
            print(f"sysctl {k} = {v} (restored)", flush=True)


def start_sysctl_agent():
    """Root side: start sysctl_agent (a thread), after removing what an
    interrupted run left; returns the event that stops it, and the thread."""
    for p in (SYSCTL_REQUEST, SYSCTL_DONE):
        if os.path.exists(p):
            os.remove(p)
    stop = threading.Event()
    agent = threading.Thread(target=sysctl_agent, args=(stop,))
    agent.start()
    return stop, agent


def sysctl_agent(stop):
    """Root side, until 'stop' is set: apply the benchmark's requests, each
    after restoring the values the one before changed, and answer (the
    request, or "error: REQUEST: what failed"); restore at the end."""
    orig = {}
    try:
        while not stop.is_set():
            if os.path.exists(SYSCTL_REQUEST):
                with open(SYSCTL_REQUEST) as f:
                    req = f.read()
                os.remove(SYSCTL_REQUEST)
                answer = req
                try:
                    restore_sysctls(orig)
                    orig = {}
                    for kv in ([] if req == "restore" else req.split(";")):
                        k, _, v = kv.partition("=")
                        if not SYSCTL_NAME.fullmatch(k) or not SYSCTL_VALUE.fullmatch(v):
                            raise ValueError(f"not a vm.* setting: {kv!r}")
                        for name in (k, sysctl_twin(k)):
                            if name and name not in orig:
                                with open(sysctl_path(name)) as f:
                                    orig[name] = f.read().strip()
                        write_sysctl(k, v)
                except (OSError, ValueError) as e:
                    answer = f"error: {req}: {e}"
                with open(SYSCTL_DONE + ".tmp", "w") as f:
                    f.write(answer)
                os.rename(SYSCTL_DONE + ".tmp", SYSCTL_DONE)
            stop.wait(0.1)
    finally:
        try:
            restore_sysctls(orig, say=True)
        except OSError as e:
            print(f"restoring the vm.* settings failed: {e}", file=sys.stderr, flush=True)
        for p in (SYSCTL_REQUEST, SYSCTL_DONE):
            if os.path.exists(p):
                os.remove(p)


def set_sysctls(settings):
    """Benchmark side: ask for the vm.* 'settings' ({}: the original values)
    and wait for the answer."""
    global sysctl_last
    req = ";".join(f"{k}={v}" for k, v in sorted(settings.items())) or "restore"
    if req == sysctl_last:
        return
    with open(SYSCTL_REQUEST + ".tmp", "w") as f:
        f.write(req)
    os.rename(SYSCTL_REQUEST + ".tmp", SYSCTL_REQUEST)
    for _ in range(300):
        time.sleep(0.1)
        if os.path.exists(SYSCTL_DONE):
            with open(SYSCTL_DONE) as f:
                answer = f.read()
            if answer == req:
                sysctl_last = req
                print(f"  sysctl: {req}", flush=True)
                return
            if answer.startswith(f"error: {req}:"):
                sys.exit(f"sysctl {answer}")
    sys.exit(f"sysctl {req}: no answer from the root process in 30 s")


# ---------------------------------------------------------------- the volume (as root)

def limits():
    """(IOPS, MB/s) of BENCH_VOLUME_PROFILE, or None ("none")."""
    if PROFILE == "none":
        return None
    if PROFILE in PROFILES:
        return PROFILES[PROFILE]
    m = re.fullmatch(r"(\d+):(\d+)", PROFILE)
    if not m:
        sys.exit(f"BENCH_VOLUME_PROFILE: {PROFILE!r}: cloud, small, IOPS:MBPS (e.g. 16000:1000) "
                 f"or none")
    return int(m.group(1)), int(m.group(2))


def run_cmd(*args):
    """Run a command (a list); exit with its output on failure."""
    r = subprocess.run(list(args), capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"{' '.join(args)} failed: {(r.stderr or r.stdout).strip()}")
    return r.stdout.strip()


def devno(path):
    """"MAJ:MIN" of a block device, or of the whole disk under a directory
    (a partition's parent), or None."""
    st = os.stat(path)
    d = st.st_rdev if stat.S_ISBLK(st.st_mode) else st.st_dev
    mm = f"{os.major(d)}:{os.minor(d)}"
    sysdir = f"/sys/dev/block/{mm}"
    if os.path.exists(os.path.join(sysdir, "partition")):
        try:
            with open(os.path.join(os.path.realpath(sysdir), "..", "dev")) as f:
                mm = f.read().strip()
        except OSError:
            pass
    return mm


def mounted(path):
    """Whether 'path' (a directory or a device) is in /proc/mounts."""
    real = os.path.realpath(path)
    with open("/proc/mounts") as f:
        for line in f:
            dev, mnt = line.split()[:2]
            if real in (os.path.realpath(dev), mnt.replace("\\040", " ")):
                return True
    return False


def builder_ids():
    try:
        pw = pwd.getpwnam(BUILDER)
    except KeyError:
        sys.exit(f"no user {BUILDER} (scripts/lib.sh creates it: run through make bench-volume)")
    return pw


def direct_write_mb_s(path, kb):
    """MB/s of CHECK_S seconds of kb-sized direct writes at queue depth 1,
    into the file 'path': fio if installed, else dd."""
    if shutil.which("fio"):
        r = subprocess.run(["fio", "--name=check", f"--filename={path}", "--rw=write",
                            f"--bs={kb}k", "--direct=1", "--ioengine=psync", "--size=1g",
                            f"--runtime={CHECK_S}", "--time_based", "--output-format=json"],
                           capture_output=True, text=True)
        if r.returncode == 0:
            try:
                return json.loads(r.stdout[r.stdout.index("{"):])["jobs"][0]["write"][
                    "bw_bytes"] / 1e6
            except (ValueError, KeyError, IndexError):
                pass
        print(f"fio failed ({r.stderr.strip()[:200]}); dd instead", flush=True)
    r = subprocess.run(["timeout", "-s", "INT", str(CHECK_S), "dd", "if=/dev/zero", f"of={path}",
                        f"bs={kb}k", "oflag=direct", f"count={(1 << 30) // (kb * 1024)}"],
                       capture_output=True, text=True)
    return dd_mb_s(r.stderr)


def dd_mb_s(out):
    m = re.search(r"(\d+) bytes .* copied, ([\d.]+) s", out)
    return benchlib.mb_s(int(m.group(1)), float(m.group(2)), mb=1e6) if m else None


def buffered_write_mb_s(path):
    """MB/s of CHECK_BUFFERED_MB MB written buffered and then fsync'ed (dd)."""
    r = subprocess.run(["dd", "if=/dev/zero", f"of={path}", "bs=1M",
                        f"count={CHECK_BUFFERED_MB}", "conv=fsync"],
                       capture_output=True, text=True)
    return dd_mb_s(r.stderr)


def volume_check(directory):
    """{"8 kB direct": MB/s, "128 kB direct": MB/s, "buffered + fsync": MB/s}
    of writes into 'directory'."""
    f = os.path.join(directory, "volume-check.tmp")
    res = {}
    try:
        for what, fn in (("8 kB direct", lambda: direct_write_mb_s(f, 8)),
                         ("128 kB direct", lambda: direct_write_mb_s(f, 128)),
                         (f"{CHECK_BUFFERED_MB} MB buffered + fsync",
                          lambda: buffered_write_mb_s(f))):
            res[what] = fn()
            print(f"  {what} writes: {fmt(res[what], 1)} MB/s", flush=True)
        return res
    finally:
        if os.path.exists(f):
            os.remove(f)


class Volume:
    """Where the clusters' data go, set up, checked and torn down: a loop
    device throttled by the root blkio cgroup (default), a block device
    (BENCH_VOLUME_DEVICE) or a directory (BENCH_VOLUME_DIR)."""

    def __init__(self):
        self.kind = "dir" if DIR else "device" if DEVICE else "loop"
        self.limits = limits() if self.kind == "loop" else None
        self.path = os.path.abspath(DIR) if DIR else MNT
        self.dev, self.mm, self.is_mounted, self.throttled = None, None, False, False
        self.wbt_saved = None
        self.damon_stopped = []
        self.child = None

    def prerequisites(self):
        """Exit with what is missing, before anything is changed."""
        root = os.geteuid() == 0
        if self.kind == "dir":
            if DEVICE:
                sys.exit("BENCH_VOLUME_DIR and BENCH_VOLUME_DEVICE: set one of them")
            if not os.path.isdir(self.path):
                sys.exit(f"BENCH_VOLUME_DIR: {self.path} is not a directory")
            extra = [e for e in os.listdir(self.path)
                     if e != "lost+found" and not e.startswith("data-")]
            if extra:
                sys.exit(f"BENCH_VOLUME_DIR: {self.path} is not empty ({' '.join(extra[:5])}): "
                         f"give an empty mountpoint")
            if not root and not os.access(self.path, os.W_OK):
                sys.exit(f"BENCH_VOLUME_DIR: {self.path} is not writable (run as root to "
                         f"chown it to {BUILDER})")
            return
        need = []
        if not root:
            need.append("root (losetup, mkfs, mount and the blkio cgroup need it; or set "
                        "BENCH_VOLUME_DIR=/an/empty/mountpoint to use a disk as it is)")
        for prog, pkg in (("losetup", "util-linux"), ("mount", "util-linux"),
                          ("umount", "util-linux"), ("mkfs.ext4", "e2fsprogs")):
            if not shutil.which(prog):
                need.append(f"{prog} (Debian package {pkg}; make deps)")
        if self.kind == "device":
            if DEVICE_OK != "yes":
                need.append(f"BENCH_VOLUME_DEVICE_OK=yes: mkfs.ext4 destroys everything on "
                            f"{DEVICE}")
            if not os.path.exists(DEVICE) or not stat.S_ISBLK(os.stat(DEVICE).st_mode):
                need.append(f"a block device at {DEVICE}")
            elif mounted(DEVICE):
                need.append(f"{DEVICE} not mounted (it is)")
        else:
            if not os.path.exists("/dev/loop-control"):
                need.append("loop device support (/dev/loop-control; modprobe loop, or in a "
                            "container: --privileged or the /dev/loop* devices)")
            if self.limits and not os.path.exists(f"{BLKIO}/blkio.throttle.write_iops_device"):
                need.append(f"cgroup v1 blkio throttling ({BLKIO}/blkio.throttle.write_iops_"
                            f"device; with cgroup v2 only, use BENCH_VOLUME_PROFILE=none "
                            f"(unthrottled) or BENCH_VOLUME_DIR)")
            os.makedirs(os.path.dirname(OUT), exist_ok=True)
            st = os.statvfs(os.path.dirname(OUT))
            if st.f_bavail * st.f_frsize < IMAGE_GB * (1 << 30):
                need.append(f"{IMAGE_GB} GB free under {os.path.dirname(OUT)} for the image "
                            f"(BENCH_VOLUME_IMAGE_GB; {st.f_bavail * st.f_frsize >> 30} GB free)")
        if need:
            sys.exit("bench-volume cannot set up the volume; missing:\n  " + "\n  ".join(need))

    def cleanup_leftovers(self):
        """What an interrupted run (killed: no teardown) left: a mount at
        MNT, the image attached."""
        if self.kind == "dir":
            return
        stop_servers(MNT)
        if mounted(MNT):
            print(f"unmounting {MNT}, left over from an earlier run", flush=True)
            run_cmd("umount", MNT)
        if self.kind == "loop" and os.path.exists(IMAGE):
            for line in run_cmd("losetup", "-j", IMAGE).splitlines():
                dev = line.split(":")[0]
                print(f"detaching {dev}, left over from an earlier run", flush=True)
                set_throttle(devno(dev), None)
                run_cmd("losetup", "-d", dev)
            os.remove(IMAGE)

    def setup(self):
        pw = builder_ids() if os.geteuid() == 0 else None
        if pw:
            for d in (os.path.dirname(OUT), OUT):
                os.makedirs(d, exist_ok=True)
                os.chown(d, pw.pw_uid, pw.pw_gid)
        else:
            os.makedirs(OUT, exist_ok=True)
        self.cleanup_leftovers()
        if self.kind == "dir":
            if pw and subprocess.run(["runuser", "-u", BUILDER, "--", "test", "-w",
                                      self.path]).returncode:
                print(f"chown {BUILDER} {self.path} ({BUILDER} cannot write there)", flush=True)
                os.chown(self.path, pw.pw_uid, pw.pw_gid)
            self.mm = devno(self.path)
            return
        if self.kind == "loop":
            with open(IMAGE, "w") as f:
                f.truncate(IMAGE_GB * (1 << 30))
            if IMAGE_KIND == "written":
                t = time.monotonic()
                run_cmd("dd", "if=/dev/zero", f"of={IMAGE}", "bs=16M", f"count={IMAGE_GB * 64}",
                        "oflag=direct", "conv=notrunc,fsync", "status=none")
                print(f"image written with zeros in {time.monotonic() - t:.0f} s", flush=True)
            self.dev = run_cmd("losetup", "--direct-io=on", "--find", "--show", IMAGE)
            print(f"loop device {self.dev} on {IMAGE} ({IMAGE_GB} GB, {IMAGE_KIND})", flush=True)
        else:
            self.dev = DEVICE
        self.mm = devno(self.dev)
        self.set_wbt()
        self.set_write_cache()
        if RECLAIM == "off":
            for kd in sorted({kd for kd, _ in benchlib.damon_pageout()}):   # a thread once
                write_file(os.path.join(kd, "state"), "off\n")
                self.damon_stopped.append(kd)
                print(f"{kd}: DAMON (proactive reclaim) stopped (BENCH_VOLUME_RECLAIM)", flush=True)
        # mkfs discards the whole device by default, and a loop device passes
        # discards on as holes punched in its image: a written image would
        # be sparse again
        run_cmd("mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0" +
                (",nodiscard" if self.kind == "loop" and IMAGE_KIND == "written" else ""),
                self.dev)
        os.makedirs(MNT, exist_ok=True)
        run_cmd("mount", self.dev, MNT)
        self.is_mounted = True
        os.chown(MNT, pw.pw_uid, pw.pw_gid)

    def wbt_file(self):
        """The device's queue/wbt_lat_usec (a partition's: its disk's)."""
        if not self.dev:
            return None
        sysdir = os.path.realpath(f"/sys/class/block/{os.path.basename(self.dev)}")
        for d in (sysdir, os.path.dirname(sysdir)):
            if os.path.exists(f"{d}/queue/wbt_lat_usec"):
                return f"{d}/queue/wbt_lat_usec"
        return None

    def set_wbt(self):
        """BENCH_VOLUME_WBT: block-layer writeback throttling of the volume
        (the kernel holds buffered writeback back when it sees the device's
        read and sync-write latency above the target)."""
        path = self.wbt_file()
        if WBT == "":
            return
        if path is None:
            sys.exit(f"BENCH_VOLUME_WBT: {self.dev} has no queue/wbt_lat_usec")
        with open(path) as f:
            self.wbt_saved = f.read().strip()
        with open(path, "w") as f:
            f.write(f"{WBT}\n")
        print(f"{path}: {self.wbt_saved} -> {WBT} (BENCH_VOLUME_WBT)", flush=True)

    def set_write_cache(self):
        """BENCH_VOLUME_WRITE_CACHE=off (on our loop device only: it goes
        when the volume does)."""
        if WRITE_CACHE == "":
            return
        if self.kind != "loop":
            sys.exit("BENCH_VOLUME_WRITE_CACHE: only on the loop device of ours")
        write_file(f"/sys/block/{os.path.basename(self.dev)}/queue/write_cache",
                   "write through\n")
        print(f"{self.dev}: write cache off (BENCH_VOLUME_WRITE_CACHE): no flush requests",
              flush=True)

    def wbt_desc(self):
        path = self.wbt_file()
        if path is None:
            return ""
        with open(path) as f:
            cur = f.read().strip()
        return (f"; writeback throttling wbt_lat_usec {cur} "
                f"({'BENCH_VOLUME_WBT' if WBT != '' else 'kernel default'})" +
                ("; write cache off, no flush requests (BENCH_VOLUME_WRITE_CACHE)"
                 if WRITE_CACHE == "off" else ""))

    def throttle(self):
        """Set the limits in the root blkio cgroup and join it (the
        benchmark's processes and the kernel's writeback are all in it)."""
        if not self.limits:
            return
        set_throttle(self.mm, self.limits)
        self.throttled = True
        with open("/proc/self/cgroup") as f:
            blkio = [ln for ln in f if ":blkio:" in ln]
        if blkio and blkio[0].strip().split(":", 2)[2] != "/":
            with open(f"{BLKIO}/cgroup.procs", "w") as f:
                f.write(str(os.getpid()))

    def describe(self, before, after):
        """The volume and its check, for the header of the tables."""
        if self.kind == "dir":
            what = f"directory {self.path} (device {self.mm}), as it is, not throttled"
        elif self.kind == "device":
            what = f"{self.dev} ({self.mm}), ext4, not throttled"
        else:
            what = (f"loop device {self.dev} ({self.mm}) with direct I/O on a {IMAGE_GB} GB "
                    f"{IMAGE_KIND} image on the work disk, ext4, ")
            what += (f"throttled to {self.limits[0]} IOPS and {self.limits[1]} MB/s, reads and "
                     f"writes (root blkio cgroup; profile {PROFILE})" if self.limits
                     else "not throttled (profile none)")
        chk = "; ".join(f"{k} {fmt(v, 1)} MB/s" + (f" (unthrottled {fmt(before[k], 1)})"
                                                   if before else "")
                        for k, v in after.items())
        return (f"volume: {what}{self.wbt_desc()}; "
                f"check ({'fio' if shutil.which('fio') else 'dd'}): {chk}")

    def wbt_recorder(self):
        """With BENCH_VOLUME_SAMPLE=1, as root, on a device with writeback
        throttling: record wbt's tracepoints and the volume's reads through
        the whole benchmark (scripts/bench/volume_trace.py wbt), for
        `volume_trace.py wbt-align`."""
        if SAMPLE != "1" or os.geteuid() != 0 or self.wbt_file() is None:
            return None
        out = benchlib.stamped_csv("volume-wbt")[:-4] + ".txt"
        print(f"recording wbt of {self.mm} to {out}", flush=True)
        return subprocess.Popen([sys.executable, os.path.join(os.path.dirname(
            os.path.abspath(__file__)), "volume_trace.py"), "wbt", "--dev", self.mm,
            "864000", out])

    def run_bench(self, desc):
        """The benchmark, as the build user when root: in a child process."""
        args = [sys.executable, os.path.abspath(__file__), "--run", self.path, self.mm or "",
                desc]
        recorder = self.wbt_recorder()
        try:
            return self.run_child(args)
        finally:
            if recorder is not None:
                recorder.terminate()        # it stops and cleans up on SIGTERM
                try:
                    recorder.wait(60)
                except subprocess.TimeoutExpired:
                    recorder.kill()
                    recorder.wait()
                    print("the wbt recorder did not stop: killed; remove its tracefs instance "
                          "by hand (rmdir /sys/kernel/tracing/instances/volume_trace_wbt)",
                          file=sys.stderr, flush=True)

    def run_child(self, args):
        """Run the benchmark's process, as the build user when root."""
        if os.geteuid() == 0:
            pw = builder_ids()
            env = dict(os.environ, HOME=pw.pw_dir, USER=pw.pw_name, LOGNAME=pw.pw_name)
            self.child = subprocess.Popen(args, user=pw.pw_uid, group=pw.pw_gid,
                                          extra_groups=[], env=env, cwd=os.environ["WORK"])
        else:
            self.child = subprocess.Popen(args)
        rc = self.child.wait()
        self.child = None
        return rc

    def teardown(self):
        """Everything back as it was; every step tried, whatever failed."""
        def step(what, fn, *args):
            try:
                fn(*args)
            except (OSError, subprocess.SubprocessError, SystemExit) as e:
                print(f"teardown: {what} failed: {e}", file=sys.stderr, flush=True)
        if self.child is not None and self.child.poll() is None:
            print("waiting for the benchmark to stop its servers", flush=True)
            benchlib.reap(self.child, 600, signal.SIGTERM)
        step("stopping the servers", stop_servers, self.path)
        if self.kind == "dir":
            for e in os.listdir(self.path):
                if e.startswith("data-"):
                    step(f"removing {e}", shutil.rmtree, os.path.join(self.path, e))
            return
        if self.is_mounted:
            step(f"unmounting {MNT}", unmount, MNT)
            step(f"removing {MNT}", os.rmdir, MNT)
        if self.throttled:
            step("removing the limits", set_throttle, self.mm, None)
        if self.wbt_saved is not None and self.wbt_file():
            step(f"restoring wbt_lat_usec {self.wbt_saved}", write_file, self.wbt_file(),
                 self.wbt_saved + "\n")
        for kd in self.damon_stopped:
            step(f"starting {kd} again", write_file, os.path.join(kd, "state"), "on\n")
        if self.kind == "loop" and self.dev:
            step(f"detaching {self.dev}", run_cmd, "losetup", "-d", self.dev)
        if self.kind == "loop" and os.path.exists(IMAGE):
            step(f"removing {IMAGE}", os.remove, IMAGE)
        print("volume torn down", flush=True)


def write_file(path, text):
    with open(path, "w") as f:
        f.write(text)


def set_throttle(mm, lim):
    """Limits (IOPS, MB/s) of device mm for the root blkio cgroup; None: none."""
    for name in THROTTLE_FILES:
        val = 0 if lim is None else lim[0] if name.endswith("iops") else lim[1] * 1000000
        path = f"{BLKIO}/blkio.throttle.{name}_device"
        if lim is None and not os.path.exists(path):
            continue
        with open(path, "w") as f:
            f.write(f"{mm} {val}\n")


def unmount(mnt):
    for _ in range(10):
        if subprocess.run(["umount", mnt], capture_output=True).returncode == 0:
            return
        time.sleep(1)
    print(f"{mnt} still busy: lazy unmount", file=sys.stderr, flush=True)
    run_cmd("umount", "-l", mnt)


def stop_servers(path):
    """Immediate shutdown (SIGQUIT) of any server whose data directory is in
    'path' (data-*), waiting for it to exit: for the teardown, after the
    benchmark stopped its own."""
    if not os.path.isdir(path):
        return
    for e in os.listdir(path):
        pidfile = os.path.join(path, e, "postmaster.pid")
        if not e.startswith("data-") or not os.path.exists(pidfile):
            continue
        try:
            with open(pidfile) as f:
                pid = int(f.readline())
            os.kill(pid, signal.SIGQUIT)
        except (OSError, ValueError):
            continue
        print(f"stopped the server of {e} (immediate)", flush=True)
        for _ in range(300):
            try:
                os.kill(pid, 0)
            except OSError:
                break
            time.sleep(0.1)


def main_volume():
    """As invoked: set up the volume, check it, run the benchmark on it (as
    the build user), tear it down."""
    vol = Volume()
    if sysctl_variants() and os.geteuid() != 0:
        sys.exit(f"the vm.* settings of {' '.join(sysctl_variants())} need root")
    vol.prerequisites()
    rc = 1
    benchlib.exit_on_sigterm()     # the finally clause tears down
    try:
        vol.setup()
        before = None
        if vol.limits:
            print(f"checking {vol.path}, unthrottled", flush=True)
            before = volume_check(vol.path)
            vol.throttle()
        print(f"checking {vol.path}" + (", throttled" if vol.limits else ""), flush=True)
        desc = vol.describe(before, volume_check(vol.path))
        if sysctl_variants():
            stop, agent = start_sysctl_agent()
            try:
                rc = vol.run_bench(desc)
            finally:
                stop.set()
                agent.join()
        else:
            rc = vol.run_bench(desc)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr, flush=True)
        rc = 130
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        vol.teardown()
    sys.exit(rc)


# ---------------------------------------------------------------- the benchmark (as pgbuild)

class Cluster(benchlib.Cluster):
    """A cluster of one build, its data directory on the volume, its log
    under work/bench/volume/; started with the settings of a run."""

    def __init__(self, build, path):
        super().__init__(build, benchlib.port("volume", list(BUILDS).index(build)), OUT,
                         prefix=os.path.join(os.environ["WORK"], BUILDS[build]))
        self.data = os.path.join(path, "data-" + build)

    def init(self, max_wal):
        super().init(f"""max_wal_size = {max_wal}
checkpoint_timeout = {CHECKPOINT_TIMEOUT}
checkpoint_completion_target = 0.9
autovacuum = off
{benchlib.LOG_SETTINGS}include_if_exists = 'variant.conf'
""")

    def start(self, settings):
        """Start with 'settings' (dict) in variant.conf, replacing the last run's."""
        with open(os.path.join(self.data, "variant.conf"), "w") as f:
            f.write("".join(f"{k} = '{v}'\n" for k, v in settings.items()))
        self.pg_ctl("start")

    def stop(self):
        self.pg_ctl("stop", "-m", "fast")


def dev_stats(mm):
    """{"read_bytes", "write_bytes", "reads", "writes"} of device mm so far,
    from the blkio statistics (root cgroup and below), or None."""
    if not mm:
        return None
    res = {}
    for fname, unit in (("io_service_bytes_recursive", "_bytes"),
                        ("io_serviced_recursive", "s")):
        try:
            with open(f"{BLKIO}/blkio.throttle.{fname}") as f:
                for line in f:
                    p = line.split()
                    if len(p) == 3 and p[0] == mm and p[1] in ("Read", "Write"):
                        res[p[1].lower() + unit] = int(p[2])
        except OSError:
            return None
    return res if len(res) == 4 else None


def dev_delta(a, b):
    return None if a is None or b is None else {k: b[k] - a[k] for k in a}


def checkpoint_times(logfile, offset, ckpts):
    """(write s, sync s) of each complete checkpoint of 'ckpts', from its
    "checkpoint complete" line."""
    done = {}
    for line in benchlib.log_lines(logfile, offset):
        m = benchlib.DONE.match(line)
        if m:
            d = benchlib.parse_done(m)
            done[d["end"]] = d
    return [(done[k["end"]]["write_s"], done[k["end"]]["sync_s"]) for k in ckpts
            if k["complete"] and k["end"] in done]


def blocks_per_write(writes, nbytes):
    return round(nbytes / writes / 8192, 2) if writes else None


def load_pgbench(clusters):
    for c in clusters:
        c.init(MAX_WAL)
        c.start({"shared_buffers": SB_SIZES["small"]})
        print(f"loading {c.name}: pgbench -i -s {SCALE} (port {c.port})", flush=True)
        t = time.monotonic()
        c.pgbench("-i", "-q", "-s", str(SCALE))
        c.psql("CHECKPOINT")
        c.stop()
        print(f"  {time.monotonic() - t:.0f} s", flush=True)


def pgbench_run(c, variant, sb, rep, sample_out=None):
    """One measured pgbench run: (summary row, per-second rows); with
    sample_out (CsvOuts of the sample seconds and checkpoints,
    BENCH_VOLUME_SAMPLE), sampled."""
    if sysctl_variants():
        set_sysctls(kernel_settings(variant))
    c.start(dict(server_settings(variant), shared_buffers=SB_SIZES[sb]))
    sampler = samples = None
    try:
        c.psql("TRUNCATE pgbench_history")
        c.psql("VACUUM pgbench_accounts, pgbench_branches, pgbench_tellers")
        c.psql("CHECKPOINT")
        c.prewarm(*benchlib.PGBENCH_RELATIONS)
        if WARMUP:
            c.pgbench(*PGBENCH, "-T", str(WARMUP))
        c.psql("CHECKPOINT")
        offset = os.path.getsize(c.log)
        logdir = os.path.join(OUT, "txlog")     # removed once read
        shutil.rmtree(logdir, ignore_errors=True)
        os.makedirs(logdir)
        c.psql("SELECT pg_stat_reset_shared('io')")
        sampler = (volume_sampler.Sampler(c, MM, *([devno(IMAGE), IMAGE] if
                                                    os.path.exists(IMAGE) else []))
                   if sample_out else None)
        dev0, cpu = dev_stats(MM), benchlib.CpuShares(c)
        t0 = time.time()
        p = c.pgbench(*PGBENCH, "-T", str(SECONDS), "-P", "1", "-l",
                      "--log-prefix", os.path.join(logdir, "tx"))
        t1 = time.time()
        samples = sampler.stop() if sampler else None
        dev = dev_delta(dev0, dev_stats(MM))
        shares = cpu.shares(t1 - t0)
        # the statistics of the checkpointer and the bgwriter reach pg_stat_io within a second
        time.sleep(1.5)
        io = c.io_writes(WRITERS)
        # before the shutdown, which hurries a running checkpoint: that one
        # is still running (not complete) at t1
        ckpts = benchlib.checkpoints(c.log, offset, t0, t1)
    finally:
        if sampler and samples is None:
            sampler.stop()      # pgbench failed
        c.stop()
        if sysctl_variants():
            set_sysctls({})
    if sample_out:
        ids = dict(run=rep, sb=sb, variant=variant)
        sample_out[0].write(volume_sampler.seconds_rows(samples, logdir, t0, **ids))
        sample_out[1].write(volume_sampler.checkpoint_rows(c.log, offset, t0, **ids))
    prog = benchlib.progress(p.stderr, rounded=True)
    secs = []
    for s in range(1, SECONDS + 1):
        tps, lat = prog.get(s, (0.0, 0.0))
        mid = t0 + s - 0.5
        secs.append(dict(run=rep, sb=sb, variant=variant, second=s, tps=tps, lat_ms=lat,
                         in_checkpoint=int(any(k["start"] <= mid < k["end"] for k in ckpts))))
    lats = []
    for pair in benchlib.tx_latencies(logdir, lambda ts: False).values():
        lats += pair[0] + pair[1]
    shutil.rmtree(logdir, ignore_errors=True)
    tps = [x["tps"] for x in secs]
    med = statistics.median(tps)
    times = checkpoint_times(c.log, offset, [k for k in benchlib.of_kinds(ckpts, ("time",))
                                             if k["start"] >= t0 and k["end"] <= t1])
    row = dict(run=rep, sb=sb, variant=variant, mean_tps=round(statistics.mean(tps), 1),
               median_tps=round(med, 1), p5_tps=benchlib.pct(tps, 0.05),
               stall_s=sum(1 for x in tps if x < STALL * med),
               lat_p99_ms=benchlib.round_or_none(benchlib.pct(lats, 0.99)),
               lat_p999_ms=benchlib.round_or_none(benchlib.pct(lats, 0.999)),
               lat_max_ms=benchlib.round_or_none(max(lats) if lats else None),
               lat_p99_time_ms=benchlib.round_or_none(time_pct(lats, 0.99)),
               transactions=len(lats), checkpoints=len(times),
               ckpt_write_s=benchlib.round_or_none(benchlib.median_of([w for w, _ in times])),
               ckpt_sync_s=benchlib.round_or_none(benchlib.median_of([s for _, s in times])),
               dev_write_mb_s=benchlib.round_or_none(dev and dev["write_bytes"] / 1e6 /
                                                     (t1 - t0), 1),
               dev_write_iops=benchlib.round_or_none(dev and dev["writes"] / (t1 - t0), 0),
               dev_read_mb_s=benchlib.round_or_none(dev and dev["read_bytes"] / 1e6 /
                                                    (t1 - t0), 1),
               cpu=shares[0], other_cpu=shares[1])
    for t, p_ in WRITERS.items():
        row[f"{p_}_writes"], row[f"{p_}_write_bytes"] = io[t]
    benchlib.print_run(row, skip=("run", "sb", "variant"))
    return row, secs


def pgbench_scenario(clusters, stem, header):
    builds = sorted({build_of(v) for v in VARIANTS}, key=list(BUILDS).index)
    load_pgbench([clusters[b] for b in builds])
    rows, seconds = [], []
    with benchlib.CsvOut(stem + ".csv", FIELDS) as out, \
            benchlib.CsvOut(stem + "-seconds.csv", SECOND_FIELDS) as sout, \
            contextlib.ExitStack() as stack:
        sample_out = None
        if SAMPLE == "1":
            sample_out = (stack.enter_context(benchlib.CsvOut(
                              stem + "-sample-seconds.csv", volume_sampler.SECOND_FIELDS)),
                          stack.enter_context(benchlib.CsvOut(
                              stem + "-sample-checkpoints.csv",
                              volume_sampler.CHECKPOINT_FIELDS)))
        for sb in SBS:
            for rep in range(1, RUNS + 1):
                for v in benchlib.rotated(VARIANTS, rep):
                    benchlib.say_run(rep, f"{v}, shared_buffers {sb} ({SB_SIZES[sb]})")
                    row, secs = pgbench_run(clusters[build_of(v)], v, sb, rep, sample_out)
                    rows.append(row)
                    seconds += secs
                    out.write([row])
                    sout.write(secs)
            plot(stem, sb, [s for s in seconds if s["sb"] == sb],
                 [r for r in rows if r["sb"] == sb])
    return pgbench_table(rows, header, read_samples(stem))


def make_copy_file():
    """The COPY input: BENCH_VOLUME_COPY_GB GiB of rows "id, 0, 100 x's"."""
    path = os.path.join(OUT, f"copy-{COPY_GB:g}GB.tsv")
    size = int(COPY_GB * (1 << 30))
    if os.path.exists(path) and os.path.getsize(path) >= size:
        return path
    print(f"writing {path}", flush=True)
    pad, i, n = "x" * 100, 1, 0
    with open(path, "w") as f:
        while n < size:
            chunk = "".join(f"{j}\t0\t{pad}\n" for j in range(i, i + 100000))
            f.write(chunk)
            n += len(chunk)
            i += 100000
    return path


def timed(c, sql):
    t = time.monotonic()
    c.psql(sql)
    return round(time.monotonic() - t, 2)


def checkpoints_started(c):
    """The "checkpoint starting" lines in the server's log so far
    (pg_stat_checkpointer counts a checkpoint only once it has ended)."""
    with open(c.log, errors="replace") as f:
        return sum("checkpoint starting:" in line for line in f)


def backend_fsyncs(c):
    """fsyncs that client backends did themselves, because the checkpointer's
    request queue was full (pg_stat_io)."""
    return int(c.psql("SELECT coalesce(sum(fsyncs), 0) FROM pg_stat_io "
                      "WHERE backend_type = 'client backend' AND object = 'relation'"))


def others_io(c):
    """Blocks written by the background writer and the checkpointer, and
    blocks whose writeback anyone requested (pg_stat_io, so far)."""
    r = c.psql("SELECT coalesce(sum(write_bytes) FILTER (WHERE backend_type = "
               "'background writer'), 0)::bigint / 8192, coalesce(sum(write_bytes) FILTER "
               "(WHERE backend_type = 'checkpointer'), 0)::bigint / 8192, "
               "coalesce(sum(writebacks), 0) FROM pg_stat_io WHERE object = 'relation'")
    return dict(zip(("bgw_blocks", "ckpt_blocks", "writebacks"), map(int, r.split("|"))))


def bulk_run(c, variant, rep, copy_file):
    if sysctl_variants():
        set_sysctls(kernel_settings(variant))
    c.start(dict(server_settings(variant), shared_buffers=BULK_SHARED_BUFFERS,
                 max_wal_size=BULK_MAX_WAL))
    try:
        c.psql("DROP TABLE IF EXISTS t")
        c.psql("CREATE TABLE t (id int, a int, pad text)")
        c.psql("CHECKPOINT")
        c.psql("SELECT pg_stat_reset_shared('io')")
        dev0 = dev_stats(MM)
        row = dict(run=rep, variant=variant)
        for step, sql in (("copy", f"COPY t FROM '{copy_file}'"),
                          ("update", "UPDATE t SET a = a + 1"), ("vacuum", "VACUUM t")):
            if step not in BULK_STEPS:
                row.update({f: None for f in BULK_FIELDS if f.startswith(step + "_")})
                continue
            # what the statement itself wrote to the device, and the
            # checkpoints that started while it ran (max_wal_size)
            ckpts0, d0, f0 = checkpoints_started(c), dev_stats(MM), backend_fsyncs(c)
            w0 = others_io(c)
            row[f"{step}_s"] = timed(c, sql)
            w1 = others_io(c)
            for k in w0:
                row[f"{step}_{k}"] = w1[k] - w0[k]
            d = dev_delta(d0, dev_stats(MM))
            row[f"{step}_dev_mb"] = d and round(d["write_bytes"] / 1e6)
            row[f"{step}_ckpts"] = checkpoints_started(c) - ckpts0
            row[f"{step}_ckpt_s"] = timed(c, "CHECKPOINT")
            # (the statement's backend has exited and reported by now)
            row[f"{step}_fsyncs"] = backend_fsyncs(c) - f0
        dev = dev_delta(dev0, dev_stats(MM))
        row["table_mb"] = round(int(c.psql("SELECT pg_table_size('t')")) / 1048576)
        time.sleep(0.5)     # the last backend's statistics
        for ctx in BULK_CONTEXTS:
            row[f"{ctx}_writes"], row[f"{ctx}_write_bytes"] = \
                c.io_writes(["client backend"], ctx)["client backend"]
        row["dev_write_mb"] = dev and round(dev["write_bytes"] / 1e6)
        row["dev_writes"] = dev and dev["writes"]
        c.psql("DROP TABLE t")
        c.psql("CHECKPOINT")
    finally:
        c.stop()
        if sysctl_variants():
            set_sysctls({})
    benchlib.print_run(row)
    return row


def gib(size):
    """A size setting ("2GB", "512MB") in GiB (0 if not understood)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kMGT]?B)\s*", size)
    if not m:
        return 0
    return float(m.group(1)) * {"kB": 2 ** -20, "MB": 2 ** -10, "GB": 1, "TB": 1024}[m.group(2)]


def bulk_scenario(clusters, stem, header, path):
    builds = sorted({build_of(v) for v in BULK_VARIANTS}, key=list(BUILDS).index)
    for b in builds:
        clusters[b].init(BULK_MAX_WAL)
    st = os.statvfs(path)
    # the table after the UPDATE, and the WAL of both clusters (at most
    # max_wal_size each, and about the WAL of one step: the table's size)
    need = 2.8 * COPY_GB + 2 * min(gib(BULK_MAX_WAL) or 2.8 * COPY_GB, 2.8 * COPY_GB)
    free = st.f_bavail * st.f_frsize / (1 << 30)
    if free < need:
        print(f"warning: {free:.1f} GB free on the volume, the bulk scenario may need about "
              f"{need:.1f} GB (BENCH_VOLUME_IMAGE_GB, BENCH_VOLUME_COPY_GB)", flush=True)
    copy_file = make_copy_file()
    rows = []
    try:
        with benchlib.CsvOut(stem + "-bulk.csv", BULK_FIELDS) as out:
            for rep in range(1, RUNS + 1):
                for v in benchlib.rotated(BULK_VARIANTS, rep):
                    benchlib.say_run(rep, v, kind="bulk run")
                    rows.append(bulk_run(clusters[build_of(v)], v, rep, copy_file))
                    out.write(rows[-1:])
    finally:
        os.remove(copy_file)
    return bulk_table(rows, header)


# ---------------------------------------------------------------- tables and plots

def table_layout(rows, header, run_width):
    """The header lines, variants, runs and the widths of the variant and
    by-run columns that pgbench_table() and bulk_table() share."""
    lines = [header] if header else []
    variants = benchlib.variants_of(rows)
    runs = sorted({r["run"] for r in rows})
    w = max([12] + [len(label(v)) for v in variants])
    rw = max(10, run_width * len(runs))
    return lines, variants, runs, w, rw


def pgbench_table(rows, header, samples=None):
    """The tables of the pgbench scenario; 'samples': the rows of its
    -sample-seconds.csv (BENCH_VOLUME_SAMPLE=1), for the device's share."""
    lines, variants, runs, w, rw = table_layout(rows, header, 9)
    for sb in dict.fromkeys(r["sb"] for r in rows):
        srows = [r for r in rows if r["sb"] == sb]
        lines += ["", f"pgbench, shared_buffers {sb} ({SB_SIZES.get(sb, sb)}): per-second tps "
                      f"and transaction latency, medians of {len(runs)} run(s)"]
        lines += benchlib.ruled(
            f"{'variant':{w}} {'mean tps by run':>{rw}} {'mean':>8} {'x upstr':>7} "
            f"{'x same':>6} {'median':>8} {'p5':>8} {'stall s':>7} {'p99 ms':>8} "
            f"{'p99.9 ms':>9} {'max ms':>8} {'p99 t ms':>8}")
        for v in variants:
            rs = sorted((r for r in srows if r["variant"] == v), key=lambda r: r["run"])
            if not rs:
                continue
            by_run = " ".join(f"{r['mean_tps']:8.1f}" for r in rs)
            x = benchlib.median_ratio(srows, v, "mean_tps", "upstream", ("run", "sb")) if v != "upstream" \
                else None
            xs = benchlib.median_ratio(srows, v, "mean_tps", same_upstream(v), ("run", "sb")) \
                if build_of(v) != "upstream" else None
            lines.append(f"{label(v):{w}} {by_run:>{rw}} {fmt(med(rs, 'mean_tps'), 1):>8} "
                         f"{fmt(x):>7} {fmt(xs):>6} {fmt(med(rs, 'median_tps'), 1):>8} "
                         f"{fmt(med(rs, 'p5_tps'), 1):>8} {fmt(med(rs, 'stall_s'), 0):>7} "
                         f"{fmt(med(rs, 'lat_p99_ms'), 1):>8} "
                         f"{fmt(med(rs, 'lat_p999_ms'), 1):>9} "
                         f"{fmt(med(rs, 'lat_max_ms'), 1):>8} "
                         f"{fmt(med([r for r in rs if 'lat_p99_time_ms' in r], 'lat_p99_time_ms'), 1):>8}")
        lines += ["", f"pgbench, shared_buffers {sb}: checkpoints and writes, medians"]
        lines += benchlib.ruled(
            f"{'variant':{w}} {'ckpts':>5} {'write s':>7} {'sync s':>7} "
            f"{'backend wr':>10} {'blk/wr':>6} {'bgwr wr':>8} {'blk/wr':>6} "
            f"{'ckpt wr':>8} {'blk/wr':>6} {'dev w MB/s':>10} {'dev w IOPS':>10} "
            f"{'dev w/tx':>8} {'dev r MB/s':>10} {'other cpu':>9}")
        for v in variants:
            rs = [r for r in srows if r["variant"] == v]
            if not rs:
                continue
            io = []
            for p in WRITERS.values():
                bpw = benchlib.median_of([blocks_per_write(r[p + "_writes"],
                                                           r[p + "_write_bytes"]) for r in rs])
                io.append(f"{fmt(med(rs, p + '_writes'), 0):>{10 if p == 'backend' else 8}} "
                          f"{fmt(bpw, 2):>6}")
            lines.append(f"{label(v):{w}} {fmt(med(rs, 'checkpoints'), 0):>5} "
                         f"{fmt(med(rs, 'ckpt_write_s'), 1):>7} "
                         f"{fmt(med(rs, 'ckpt_sync_s'), 2):>7} "
                         f"{' '.join(io)} {fmt(med(rs, 'dev_write_mb_s'), 1):>10} "
                         f"{fmt(med(rs, 'dev_write_iops'), 0):>10} "
                         f"{fmt(benchlib.median_of([benchlib.ratio(r['dev_write_iops'], r['mean_tps']) for r in rs]), 3):>8} "
                         f"{fmt(med(rs, 'dev_read_mb_s'), 1):>10} "
                         f"{fmt(med(rs, 'other_cpu'), 2):>9}")
        lines += smooth_verdict(srows, [x for x in samples or [] if x["sb"] == sb])
        if sb == "small":
            lines.append("")
            for v, base, target, no_stall, max_ms in TARGETS_PGBENCH:
                if not any(r["variant"] == v for r in srows) or \
                        not any(r["variant"] == base for r in srows):
                    continue
                x = benchlib.median_ratio(srows, v, "mean_tps", base, ("run", "sb"))
                stalls = max(r["stall_s"] for r in srows if r["variant"] == v)
                longest = max(r["lat_max_ms"] for r in srows if r["variant"] == v)
                ok = x is not None and x >= target and (not no_stall or stalls == 0) and \
                    (max_ms is None or longest < max_ms)
                lines.append(f"target: {label(v)} mean tps >= {target} x {label(base)}'s" +
                             (" and no stall second" if no_stall else "") +
                             (f" and every transaction < {max_ms} ms" if max_ms else "") +
                             f": {fmt(x)} x" + (f", stall seconds {stalls} at most"
                                                if no_stall else "") +
                             (f", longest {fmt(longest, 0)} ms" if max_ms else "") +
                             f" -> {'met' if ok else 'NOT met'}")
    lines += ["", f"mean / median / p5 = of the per-second tps (pgbench -P 1) of a run; stall s = "
                  f"seconds with tps below {STALL} x the run's median; x upstr = median of the "
                  f"ratios, within a run, of mean tps to upstream's (buffered); x same = to the "
                  f"upstream variant with the same settings; latencies of every transaction "
                  f"(pgbench -l); p99 t = the latency below which the clients spent 99% of "
                  f"their time in transactions (each weighs its latency: a stall's few long "
                  f"transactions weigh what they waited); ckpts = timed checkpoints started and completed in the run, "
                  f"write s and sync s = the median of theirs; wr = pg_stat_io writes (relation, "
                  f"context normal) in the run of the client backends, the background writer, the "
                  f"checkpointer, blk/wr = write_bytes / writes / 8192; dev = the device's writes "
                  f"and reads (blkio statistics), dev w/tx = its writes per transaction; other cpu = share of the machine's CPU used by "
                  f"other processes than the server and pgbench"]
    return "\n".join(lines)


def device_share(samples, variant):
    """What the device did in the sampled seconds of 'variant' (all runs),
    or None: the share of seconds at SATURATED x the IOPS limit or more, the
    device's writes per transaction, and per transaction the WAL writes, the
    relation writes and blocks of pg_stat_io; 'wal_io' and 'rel_io': device
    writes per WAL write and per relation write, by least squares over the
    seconds (dev IOPS = wal_io x WAL writes + rel_io x relation writes; it
    holds for a server that requests writeback of what it writes, not for
    one whose writes the kernel flushes later)."""
    secs = [x for x in samples if x["variant"] == variant and x["dev_w_iops"] is not None]
    lim = limits()
    if not secs or not lim:
        return None

    def num(x, k):
        return x.get(k) or 0
    tx = sum(num(x, "tps") for x in secs)
    wal = [num(x, "be_wal_writes") + num(x, "walw_wal_writes") + num(x, "bgw_wal_writes") +
           num(x, "ckpt_wal_writes") for x in secs]
    rel = [sum(num(x, f"{p}_writes") for p in ("be", "bgw", "ckpt")) for x in secs]
    blocks = sum(sum(num(x, f"{p}_write_bytes") for p in ("be", "bgw", "ckpt"))
                 for x in secs) * 1e6 / 8192
    dev = [num(x, "dev_w_iops") for x in secs]
    s11, s22, s12 = (sum(a * a for a in wal), sum(b * b for b in rel),
                     sum(a * b for a, b in zip(wal, rel)))
    t1, t2 = sum(a * y for a, y in zip(wal, dev)), sum(b * y for b, y in zip(rel, dev))
    det = s11 * s22 - s12 * s12
    return {"seconds": len(secs),
            "saturated": sum(d >= SATURATED * lim[0] for d in dev) / len(secs),
            "dev_iops": sum(dev) / len(secs), "tx": tx,
            "io_per_tx": sum(dev) / tx if tx else None,
            "wal_per_tx": sum(wal) / tx if tx else None,
            "rel_per_tx": sum(rel) / tx if tx else None,
            "blocks_per_tx": blocks / tx if tx else None,
            "wal_io": (t1 * s22 - t2 * s12) / det if det else None,
            "rel_io": (s11 * t2 - s12 * t1) / det if det else None}


def smooth_verdict(srows, samples):
    """SMOOTH_TARGETS for every buffered series variant whose upstream
    variant with the same settings ran, and, with samples, the device's
    share: was the volume at its IOPS limit, and how many fewer device writes
    per transaction a tps target would take."""
    lines = []
    for v in dict.fromkeys(r["variant"] for r in srows):
        base = same_upstream(v)
        if build_of(v) != "series" or is_direct(v) or \
                not any(r["variant"] == base for r in srows):
            continue
        vr = [r for r in srows if r["variant"] == v]
        cadence = "checkpoints by WAL" if "max_wal_size" in v else "checkpoints by time"
        lines += ["", f"smooth without a price, {cadence}: {label(v)} against {label(base)}, "
                      f"{len(vr)} run(s)"]
        lines += benchlib.ruled(f"{'target':28} {'bound':>8} {'by run':>26} {'result':>8} "
                                f"{'verdict':>8}")
        misses = []
        for name, key, how, bound in SMOOTH_TARGETS:
            if how.startswith("max"):
                by_run = [r[key] for r in sorted(vr, key=lambda r: r["run"])]
                got = max((x for x in by_run if x is not None), default=None)
                ok = got is not None and (got <= bound if how == "max <=" else got < bound)
                shown = " ".join(fmt(x, 0) for x in by_run)
                result = fmt(got, 0)
            else:
                by_run = benchlib.paired_ratios(srows, v, key, same=("run", "sb"), base=base)
                got = benchlib.median_of(by_run)
                ok = got is not None and (got >= bound if how == "ratio >=" else got <= bound)
                shown = " ".join(fmt(x) for x in by_run)
                result = fmt(got) + "x"
            if not ok:
                misses.append((name, key, bound))
            lines.append(f"{name:28} {how.split()[1] + ' ' + str(bound):>8} {shown:>26} "
                         f"{result:>8} {'met' if ok else 'NOT met':>8}")
        share = {x: device_share(samples, x) for x in (base, v)}
        if all(share.values()):
            lines.append(f"device (sampled seconds): at >= {SATURATED:g} x {limits()[0]} write "
                         f"IOPS in {fmt(100 * share[base]['saturated'], 0)}% of "
                         f"{label(base)}'s seconds and {fmt(100 * share[v]['saturated'], 0)}% "
                         f"of {label(v)}'s")
            for x in (base, v):
                d = share[x]
                lines.append(
                    f"  {label(x)}: {fmt(d['dev_iops'], 0)} device writes/s, "
                    f"{fmt(d['io_per_tx'])} per transaction; per transaction "
                    f"{fmt(d['wal_per_tx'])} WAL writes, {fmt(d['rel_per_tx'])} relation "
                    f"writes of {fmt(d['blocks_per_tx'])} blocks" +
                    (f"; device writes per WAL write {fmt(d['wal_io'], 2)}, per relation "
                     f"write {fmt(d['rel_io'], 2)} (least squares over the seconds)"
                     if build_of(x) == "series" else ""))
            for name, key, bound in misses:
                if key not in ("mean_tps", "median_tps"):
                    continue
                need = bound * med([r for r in srows if r["variant"] == base], key)
                have = med(vr, "mean_tps")
                io_need = share[v]["dev_iops"] / need
                lines.append(f"  {name} >= {bound} x: {fmt(need, 0)} tps, at the series' "
                             f"{fmt(share[v]['dev_iops'], 0)} device writes/s "
                             f"{fmt(io_need)} per transaction, "
                             f"{fmt(100 * (1 - io_need / share[v]['io_per_tx']), 1)}% fewer than "
                             f"its {fmt(share[v]['io_per_tx'])} (it ran at {fmt(have, 0)} tps)")
    return lines


def bulk_table(rows, header):
    lines, variants, runs, w, rw = table_layout(rows, header, 8)
    lines += ["", f"bulk: COPY, UPDATE, VACUUM of a new table (s), medians of {len(runs)} run(s)"]
    lines += benchlib.ruled(
        f"{'variant':{w}} {'COPY s by run':>{rw}} {'COPY':>7} {'+ckpt':>7} {'x same':>6} "
        f"{'UPDATE':>7} {'+ckpt':>7} {'VACUUM':>7} {'+ckpt':>7} {'x same':>6} "
        f"{'bulkwr blk/wr':>13} {'vacuum blk/wr':>13} {'normal blk/wr':>13} "
        f"{'table MB':>8} {'dev MB':>7} {'COPY dev MB/s':>13} {'VAC dev MB/s':>12} "
        f"{'ckpts in COPY':>13} {'COPY fsyncs':>11}")

    def bpw(rs, ctx):
        return fmt(benchlib.median_of([blocks_per_write(r[f"{ctx}_writes"],
                                                        r[f"{ctx}_write_bytes"]) for r in rs]), 2)
    def with_ckpt(rs, step):
        return benchlib.median_of([r[f"{step}_s"] + r[f"{step}_ckpt_s"] for r in rs
                                   if r[f"{step}_s"] is not None])
    def dev_rate(rs, step):
        # MB/s the statement wrote to the device (CSVs before these columns: -)
        return benchlib.median_of([r[f"{step}_dev_mb"] / r[f"{step}_s"] for r in rs
                                   if r.get(f"{step}_dev_mb") is not None and r[f"{step}_s"]])
    targets = []
    for v in variants:
        rs = sorted((r for r in rows if r["variant"] == v), key=lambda r: r["run"])
        base = same_upstream(v)
        xc = xv = None
        if build_of(v) != "upstream" and any(r["variant"] == base for r in rows):
            xc = benchlib.median_ratio(rows, v, "copy_s", base, ("run",))
            xv = benchlib.median_ratio(rows, v, "vacuum_s", base, ("run",))
            t = 0.3 if is_direct(v) else 0.9
            ok = xc is not None and xv is not None and xc <= t and xv <= t
            targets.append(f"target: {v} / {base}, COPY and VACUUM time <= {t}: {fmt(xc)} and "
                           f"{fmt(xv)} -> {'met' if ok else 'NOT met'}")
        by_run = " ".join(f"{r['copy_s']:7.1f}" for r in rs)
        lines.append(f"{v:{w}} {by_run:>{rw}} "
                     f"{fmt(med(rs, 'copy_s'), 1):>7} {fmt(with_ckpt(rs, 'copy'), 1):>7} "
                     f"{fmt(xc):>6} {fmt(med(rs, 'update_s'), 1):>7} "
                     f"{fmt(with_ckpt(rs, 'update'), 1):>7} "
                     f"{fmt(med(rs, 'vacuum_s'), 1):>7} {fmt(with_ckpt(rs, 'vacuum'), 1):>7} "
                     f"{fmt(xv):>6} {bpw(rs, 'bulkwrite'):>13} {bpw(rs, 'vacuum'):>13} "
                     f"{bpw(rs, 'normal'):>13} {fmt(med(rs, 'table_mb'), 0):>8} "
                     f"{fmt(med(rs, 'dev_write_mb'), 0):>7} {fmt(dev_rate(rs, 'copy'), 0):>13} "
                     f"{fmt(dev_rate(rs, 'vacuum'), 0):>12} "
                     f"{' '.join(str(r.get('copy_ckpts', '-')) for r in rs):>13} "
                     f"{' '.join(str(r.get('copy_fsyncs', '-')) for r in rs):>11}")
    lines += [""] + targets
    lines += ["", "COPY, UPDATE, VACUUM = the statement's time; +ckpt = with the CHECKPOINT right "
                  "after it (what buffered writes leave to the kernel is written then); x same = "
                  "median of the ratios, within a run, to the upstream variant with the same "
                  "settings (first: COPY, second: VACUUM); blk/wr = pg_stat_io write_bytes / "
                  "writes / 8192 of the client backends in contexts bulkwrite (COPY), vacuum "
                  "(VACUUM) and normal (mostly the UPDATE); table MB = after the VACUUM; dev MB "
                  "= written to the device in the run (blkio statistics); COPY/VAC dev MB/s = written to "
                  "the device while the statement ran, per second of it; ckpts in COPY = "
                  "checkpoints started while COPY ran, COPY fsyncs = fsyncs by the COPY's backend (pg_stat_io: "
                  "the checkpointer's request queue was full), run by run"]
    return "\n".join(lines)


def plot(stem, sb, secs, rows):
    """stem-<sb>.png: per-second tps, a panel per variant, each run a line,
    run 1's checkpoints shaded."""
    if not secs or not benchlib.have_gnuplot():
        return
    variants = benchlib.variants_of(secs)
    runs = sorted({s["run"] for s in secs})
    png = f"{stem}-{sb}.png"
    top = max(float(s["tps"]) for s in secs) * 1.1 or 1
    script = benchlib.multiplot_head(
        png, 260 * len(variants) + 60, len(variants),
        f"pgbench tps per second, shared_buffers {sb} ({SB_SIZES.get(sb, sb)}), "
        f"checkpoint_timeout {CHECKPOINT_TIMEOUT} (shaded: checkpoints of run 1)")
    script += ["set ylabel 'tps'", "set xlabel 'seconds'", "set key top right",
               "set style fill transparent solid 0.15 noborder", f"set yrange [0:{top:.0f}]",
               f"set xrange [0:{max(int(s['second']) for s in secs)}]"]
    colors = ["blue", "dark-green", "red", "purple", "brown", "black"]
    for v in variants:
        plots = []
        for rep in runs:
            dat = os.path.join(OUT, f"plot-{sb}-{benchlib.file_name(v)}-{rep}.dat"
                               .replace("=", "-"))
            benchlib.write_dat(dat, [s for s in secs if s["variant"] == v and s["run"] == rep],
                               ("second", "tps", "in_checkpoint"))
            if rep == runs[0]:
                # second s covers [s - 1, s)
                plots.append(f"'{dat}' using ($1-1):($3*{top:.0f}) with fillsteps "
                             f"lc rgb 'orange' title 'checkpoint (run {rep})'")
            plots.append(f"'{dat}' using 1:2 with lines lw 1.2 "
                         f"lc rgb '{colors[(rep - 1) % len(colors)]}' title 'run {rep}'")
        stats = ", ".join(f"run {r['run']}: mean {r['mean_tps']}, stall s {r['stall_s']}"
                          for r in rows if r["variant"] == v)
        script.append(f"set title '{v}: {stats}'")
        script.append("plot " + ", ".join(plots))
    benchlib.gnuplot(script, png)


def read_samples(stem):
    """The rows of stem-sample-seconds.csv (or .csv.gz, as in bench-results/),
    or None."""
    for p in (stem + "-sample-seconds.csv", stem + "-sample-seconds.csv.gz"):
        if os.path.exists(p):
            return benchlib.read_csv(p)
    return None


def stem_of(path):
    for suffix in ("-bulk.csv", "-seconds.csv", ".csv"):
        if path.endswith(suffix):
            return path[:-len(suffix)]
    sys.exit(f"{path}: not a CSV of bench_volume.py")


def again():
    """--table FILE.csv / --replot FILE.csv; returns whether it was one."""
    args = sys.argv[1:]
    if len(args) != 2 or args[0] not in ("--table", "--replot"):
        return False
    stem = stem_of(args[1])
    have = {s: os.path.exists(stem + s) for s in (".csv", "-seconds.csv", "-bulk.csv")}
    if args[0] == "--table":
        texts = [f"(from {stem}*.csv)"]
        for suffix in (".csv", "-bulk.csv"):
            if have[suffix]:
                # by its columns: a bulk CSV renamed without "-bulk" is one still
                rows = benchlib.read_csv(stem + suffix)
                if rows and "copy_s" in rows[0]:
                    texts.append(bulk_table(rows, None))
                else:
                    texts.append(pgbench_table(rows, None, read_samples(stem)))
        print("\n".join(texts))
    else:
        if not have["-seconds.csv"]:
            sys.exit(f"no {stem}-seconds.csv")
        secs = benchlib.read_csv(stem + "-seconds.csv")
        rows = benchlib.read_csv(stem + ".csv") if have[".csv"] else []
        for sb in dict.fromkeys(s["sb"] for s in secs):
            plot(stem, sb, [s for s in secs if s["sb"] == sb], [r for r in rows if r["sb"] == sb])
    return True


MM = None       # the volume's device (MAJ:MIN), for its blkio statistics


def probe_scenario(stem, path):
    """The device alone: steady 8 kB direct writes (fio), its pauses."""
    if not shutil.which("fio"):
        sys.exit("the probe needs fio (apt-get install fio)")
    log = stem + "-probe"
    what = (f"fio {PROBE_BS} random direct writes, QD{PROBE_DEPTH}, " +
            (f"{PROBE_IOPS} IOPS" if PROBE_IOPS > 0 else "unlimited (the device's limit)") +
            (f", fsync every {PROBE_FSYNC} writes" if PROBE_FSYNC > 0 else ""))
    print(f"probe: {what}, {PROBE_SECONDS} s", flush=True)
    engine = (["--ioengine=psync"] if PROBE_DEPTH <= 1 else
              ["--ioengine=libaio", f"--iodepth={PROBE_DEPTH}"])
    rate = [f"--rate_iops={PROBE_IOPS}"] if PROBE_IOPS > 0 else []
    if PROBE_FSYNC > 0:
        rate.append(f"--fsync={PROBE_FSYNC}")
    subprocess.run(["fio", "--name=probe", f"--directory={path}", "--rw=randwrite",
                    f"--bs={PROBE_BS}", "--direct=1", "--size=1G", "--time_based",
                    f"--runtime={PROBE_SECONDS}"] + engine + rate +
                   [f"--write_iops_log={log}",
                    f"--write_lat_log={log}", "--log_avg_msec=1000", "--log_max_value=1",
                    "--output=/dev/null"], check=True)

    def series(suffix):
        with open(f"{log}_{suffix}.1.log") as f:
            return [int(line.split(",")[1]) for line in f if line.strip()]
    iops = series("iops")
    clat_ms = [v / 1e6 for v in series("clat")]
    for suffix in ("iops", "clat", "lat", "slat"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f"{log}_{suffix}.1.log")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(path, "probe.0.0"))
    with open(log + ".csv", "w") as f:
        f.write("second,writes,max_write_ms\n")
        for i, (n, ms) in enumerate(zip(iops, clat_ms), 1):
            f.write(f"{i},{n},{ms:.1f}\n")
    expected = PROBE_IOPS if PROBE_IOPS > 0 else statistics.median(iops)
    dips = [i for i, n in enumerate(iops, 1) if n < expected * STALL]
    slow = [i for i, ms in enumerate(clat_ms, 1) if ms >= 500]
    return (f"\ndevice probe (no server): {what}, "
            f"{len(iops)} s: median {statistics.median(iops):.0f} writes/s, "
            f"min {min(iops) if iops else 0}; dips (seconds below {expected * STALL:g} "
            f"writes) {len(dips)}" + (f" at s {' '.join(map(str, dips[:20]))}" if dips else "") +
            f"; seconds with a write of 500 ms or more {len(slow)}" +
            (f" at s {' '.join(map(str, slow[:20]))}" if slow else "") +
            f"; longest write {max(clat_ms) if clat_ms else 0:.0f} ms; per second: {log}.csv")


def main_run(path, mm, desc):
    """The benchmark on the volume at 'path' (as the build user)."""
    global MM
    MM = mm or None
    os.environ.setdefault("PGCTLTIMEOUT", "1800")   # a shutdown checkpoint at 8 kB per I/O
    os.makedirs(OUT, exist_ok=True)
    stem = benchlib.stamped_csv("volume")[:-4]
    parts = []
    if "pgbench" in SCENARIOS:
        parts.append(f"pgbench: scale {SCALE}, -M prepared -c {CLIENTS} -j {min(2, CLIENTS)}, "
                     f"{SECONDS} s (+{WARMUP} s warm-up) per run, checkpoint_timeout "
                     f"{CHECKPOINT_TIMEOUT}, checkpoint_completion_target 0.9, max_wal_size "
                     f"{MAX_WAL}")
    if "bulk" in SCENARIOS:
        parts.append(f"bulk: COPY of {COPY_GB:g} GiB, shared_buffers {BULK_SHARED_BUFFERS}, "
                     f"max_wal_size {BULK_MAX_WAL}")
    header = (f"volume benchmark, unpatched 18.6 (upstream) vs the series; {desc}\n" +
              ("; ".join(parts) + f"; {RUNS} run(s) interleaved; autovacuum off (VACUUM "
               "before each pgbench run), data checksums on; " if parts else "") +
              f"machine: {benchlib.machine()}, {benchlib.mem_total_mb()} MB RAM")
    print(header, flush=True)
    start = time.monotonic()
    benchlib.exit_on_sigterm()
    clusters = {b: Cluster(b, path) for b in BUILDS}
    texts = [header]
    try:
        for c in clusters.values():
            c.stop_if_running()     # left over from an interrupted run
        if "pgbench" in SCENARIOS:
            texts.append(pgbench_scenario(clusters, stem, None))
        if "bulk" in SCENARIOS:
            texts.append(bulk_scenario(clusters, stem, None, path))
        if "probe" in SCENARIOS:
            texts.append(probe_scenario(stem, path))
    finally:
        for c in clusters.values():
            c.stop_if_running()
        shutil.rmtree(os.path.join(OUT, "txlog"), ignore_errors=True)
    outputs = [p for p in (stem + "-seconds.csv", stem + "-bulk.csv",
                           stem + "-sample-seconds.csv", stem + "-sample-checkpoints.csv")
               if os.path.exists(p)]
    benchlib.report("\n".join(texts) + ("\nalso: " + ", ".join(outputs) if outputs else ""),
                    start, stem + (".csv" if "pgbench" in SCENARIOS else
                                   "-bulk.csv" if "bulk" in SCENARIOS else "-probe.csv"),
                    stem + ".txt")


def main():
    if again():
        return
    unknown = [s for s in SCENARIOS if s not in ("pgbench", "bulk", "probe")]
    if unknown or not SCENARIOS:
        sys.exit(f"BENCH_VOLUME_SCENARIOS: {' '.join(SCENARIOS)}: \"pgbench\", \"bulk\", "
                 "\"probe\" or several")
    bad_sb = [s for s in SBS if s not in SB_SIZES]
    if bad_sb:
        sys.exit(f"BENCH_VOLUME_SB: unknown {bad_sb}: \"small\", \"large\" or both")
    check_variants(VARIANTS, "BENCH_VOLUME_VARIANTS")
    check_variants(BULK_VARIANTS, "BENCH_VOLUME_BULK_VARIANTS")
    if RUNS < 1:
        sys.exit("BENCH_VOLUME_RUNS: at least 1")
    if SAMPLE not in ("", "0", "1"):
        sys.exit(f"BENCH_VOLUME_SAMPLE: {SAMPLE!r}: \"1\" (sample) or unset")
    if IMAGE_KIND not in ("sparse", "written"):
        sys.exit(f"BENCH_VOLUME_IMAGE: {IMAGE_KIND!r}: \"sparse\" or \"written\"")
    if WBT != "" and not re.fullmatch(r"[0-9]{1,9}", str(WBT)):
        sys.exit(f"BENCH_VOLUME_WBT: {WBT!r}: microseconds (0: off) or unset")
    if WRITE_CACHE not in ("", "off"):
        sys.exit(f"BENCH_VOLUME_WRITE_CACHE: {WRITE_CACHE!r}: \"off\" or unset")
    if RECLAIM not in ("", "off"):
        sys.exit(f"BENCH_VOLUME_RECLAIM: {RECLAIM!r}: \"off\" or unset")
    if RECLAIM == "off" and DIR:     # a volume of ours only (which needs root)
        sys.exit("BENCH_VOLUME_RECLAIM=off: not with BENCH_VOLUME_DIR")
    if WBT != "" and DIR:
        sys.exit("BENCH_VOLUME_WBT: not with BENCH_VOLUME_DIR (no device of ours to set)")
    if sys.argv[1:2] == ["--run"] and len(sys.argv) == 5:
        try:
            main_run(*sys.argv[2:])
        except KeyboardInterrupt:
            sys.exit("interrupted")
        return
    if sys.argv[1:]:
        sys.exit("usage: bench_volume.py [--table FILE.csv | --replot FILE.csv]")
    main_volume()


if __name__ == "__main__":
    main()
