#!/usr/bin/python3
"""Immediate-checkpoint benchmark: unpatched PostgreSQL vs the patch series,
the series with each io_method.

One table that fits in shared_buffers, with fillfactor 50 and ~1 kB rows
(3 per page), so that an UPDATE of a non-indexed column is a HOT update that
dirties the heap pages of the rows it updates and nothing else.  Scenarios:
  all      every page dirty ("immediate checkpoint with all buffers dirty");
  random   the rows of a pseudo-random quarter of the 3-row groups
           (id / 3) updated: their groups straddle pages, so ~7/16 (44%)
           of the pages are dirty, in runs of ~3 blocks (gaps everywhere).
Each run first settles the table: VACUUM (FREEZE) prunes the dead row
versions of the previous run and sets every hint bit, a SELECT count(*)
reads every page, and a CHECKPOINT writes all of that out, so that nothing
is dirty and nothing is left for the UPDATE's own scan to prune or hint
(without this, the first "random" run after "all" dirtied every page).
Then it dirties the table, counts the dirty buffers (pg_buffercache_summary),
runs CHECKPOINT and records:
  - the dirty buffers before the UPDATE (~0) and after it, and the expected
    count: the table's blocks (all) or the blocks holding a row that the
    UPDATE changes (random), counted once on the fresh table; a run whose
    dirty count is off by more than 2% is flagged ("!") and makes the
    script exit with status 1 after printing the table;
  - write, sync, total and sort time from the "checkpoint complete" line;
  - the checkpointer's writes and write_bytes from pg_stat_io
    (backend_type checkpointer, object relation, context normal).

Variants (BENCH_VARIANTS):
  upstream        unpatched, io_method at its default (worker);
  patched-sync    the series with io_method = sync: the checkpointer writes
                  synchronously (the write path of the previous series);
  patched         the series with io_method = worker (the default): the
                  checkpointer writes through AIO (checkpoint_io_concurrency,
                  default 16);
  patched-uring   the series with io_method = io_uring;
  patched-nosort  as patched, with checkpoint_sort = off;
  prev:VARIANT    VARIANT (one of the series) run by the previous build of
                  the series in BENCH_PREV_INSTALL (README.md), on a cluster
                  of its own, e.g. prev:patched beside patched.
io_method is postmaster-only, so every io_method has its own cluster
(benchlib.cluster_of: upstream, patched, patched-sync, patched-uring, and
prev: + those for prev: variants; patched and patched-nosort share one, only
a reloadable setting differs), written
into its postgresql.conf at initdb.  The clusters are loaded with identical
data and all of them run side by side, each with shared_buffers = BENCH_MB
+ 256 + BENCH_MB/4 MB (a warning if their sum exceeds 60% of MemTotal);
runs are interleaved (upstream, patched, ... , upstream, patched, ...) so
that drift of the machine hits every variant alike.  The table shows medians
and the variant/upstream ratio of the medians.

With "direct" among the I/O modes, fio then measures the device in the same
directory: sequential writes of 128 kB blocks, direct I/O, 512 MB, end_fsync,
at queue depth 1 (ioengine psync) and 8 (ioengine libaio, iodepth 8).  A
second table gives every variant's checkpoint bandwidth (median write_bytes /
median total time) as a fraction of both.

Environment (defaults in brackets; BENCH_SCENARIOS, BENCH_SETTINGS and
BENCH_PORT, shared by the benchmarks, are described in README.md):
  BENCH_MB [1024]        table size in MB
  BENCH_RUNS [3]         runs per variant, I/O mode and scenario
  BENCH_IO ["buffered direct"]   I/O modes; direct = debug_io_direct=data
  BENCH_VARIANTS ["upstream patched-sync patched patched-uring"]
BENCH_SCENARIOS: "all" and "random" are this script's (without them it does
nothing).  BENCH_SETTINGS: reloadable settings only (io_method and
checkpoint_io_concurrency need a restart).  Ports: BENCH_PORT + 0, + 1, ...
Output: work/bench/immediate.csv, the tables on stdout and, when fio ran,
work/bench/immediate-fio.csv (io, scenario, variant, mb_s, fio_qd1_mb_s,
fio_qd8_mb_s, frac_qd1, frac_qd8).
"""

import os
import shutil
import subprocess
import sys
import time

import benchlib
from benchlib import med

OUT = benchlib.bench_dir()
MB, RUNS, IO_MODES, VARIANTS = benchlib.settings(
    "BENCH", MB=1024, RUNS=3, IO=["buffered", "direct"],
    VARIANTS=["upstream", "patched-sync", "patched", "patched-uring"])
RANDOM = "hashint4(id / 3) % 4 = 0"
DIRTY = {"all": "UPDATE bench SET n = n + 1",
         "random": f"UPDATE bench SET n = n + 1 WHERE {RANDOM}"}
# the blocks each scenario's UPDATE dirties, counted on the fresh table
# (HOT updates keep every row in its block)
EXPECTED = {"all": "SELECT pg_relation_size('bench') / 8192",
            "random": f"SELECT count(DISTINCT (ctid::text::point)[0]) FROM bench WHERE {RANDOM}"}
TOLERANCE = 0.02        # a run's dirty count may be off its expected count by this much
SCENARIOS = [s for s in benchlib.bench_scenarios() if s in DIRTY]
FIELDS = ["io", "scenario", "variant", "run", "dirty_before", "dirty", "expected_dirty",
          "dirty_dev", "dirty_ok", "written", "write_s", "sync_s", "total_s", "sort_s",
          "wall_s", "writes", "write_bytes"]
FIO_FIELDS = ["io", "scenario", "variant", "mb_s", "fio_qd1_mb_s", "fio_qd8_mb_s",
              "frac_qd1", "frac_qd8"]

# ~1 kB rows, 3 per page at fillfactor 50: 8 kB page per 3 rows
ROWS = MB * 1024 * 1024 // 8192 * 3
W = max([15] + [len(v) for v in VARIANTS])     # width of the variant column


def variant_settings(v):
    base = benchlib.base_variant(v)
    sort = "off" if base == "patched-nosort" else "on" if base.startswith("patched") else None
    return benchlib.variant_settings(v, implied={"checkpoint_sort": sort} if sort else None)


class Cluster(benchlib.Cluster):
    # one cluster per installation and io_method (postmaster-only), named by
    # benchlib.cluster_of; patched and patched-nosort share one: only a
    # reloadable GUC differs
    def __init__(self, name, port):
        super().__init__(name, port, OUT)

    def init(self, shared_buffers_mb):
        super().init(f"""shared_buffers = {shared_buffers_mb}MB
io_method = {benchlib.cluster_io_method(self.name)}
max_wal_size = 50GB
checkpoint_timeout = 1d
autovacuum = off
# the setup writes much WAL; none of this changes how the checkpoint writes
wal_level = minimal
max_wal_senders = 0
full_page_writes = off
synchronous_commit = off
{benchlib.LOG_SETTINGS}include_if_exists = 'bench.conf'
""")

    def set_io(self, mode):
        with open(os.path.join(self.data, "bench.conf"), "w") as f:
            f.write(benchlib.io_conf(mode))

    def load(self):
        """The table, frozen and checkpointed; returns the expected dirty
        count per scenario."""
        self.psql("CREATE EXTENSION pg_buffercache")
        # one transaction: with wal_level = minimal the load skips WAL
        self.psql("BEGIN; CREATE TABLE bench (id int, n int, filler char(1000)) "
                  "WITH (fillfactor = 50); "
                  f"INSERT INTO bench SELECT g, 0, 'x' FROM generate_series(1, {ROWS}) g; COMMIT")
        self.psql("VACUUM (FREEZE) bench")
        self.psql("CHECKPOINT")
        return {s: int(self.psql(EXPECTED[s])) for s in SCENARIOS}

    def settle(self):
        """Nothing dirty, and nothing left that a scan would prune or hint:
        the next UPDATE dirties exactly the blocks of the rows it changes."""
        self.psql("VACUUM (FREEZE) bench")
        self.psql("SELECT count(*) FROM bench")
        self.psql("CHECKPOINT")

    def dirty(self):
        return int(self.psql("SELECT buffers_dirty FROM pg_buffercache_summary()"))

    def ckpt_io(self):
        return self.io_writes(["checkpointer"])["checkpointer"]


def one_run(c, v, mode, scenario, run, expected):
    c.settle()
    c.set_settings(variant_settings(v))
    dirty_before = c.dirty()
    c.psql(DIRTY[scenario])
    dirty = c.dirty()
    done_before = c.checkpoints_done()
    w0, b0 = c.ckpt_io()
    offset = os.path.getsize(c.log)
    t0 = time.monotonic()
    c.psql("CHECKPOINT")
    wall = time.monotonic() - t0
    for _ in range(200):
        if c.checkpoints_done() > done_before:
            break
        time.sleep(0.05)
    w1, b1 = c.ckpt_io()
    done = None
    for _ in range(100):
        done = benchlib.last_checkpoint_complete(c.log, offset)
        if done:
            break
        time.sleep(0.05)
    if not done:
        sys.exit(f"no checkpoint complete line in {c.log}")
    dev = dirty / expected - 1 if expected else 0.0
    row = dict(io=mode, scenario=scenario, variant=v, run=run, dirty_before=dirty_before,
               dirty=dirty, expected_dirty=expected, dirty_dev=round(dev, 4),
               dirty_ok=int(abs(dev) <= TOLERANCE), written=done["buffers"],
               write_s=done["write_s"], sync_s=done["sync_s"], total_s=done["total_s"],
               sort_s=done["sort_s"], wall_s=round(wall, 3), writes=w1 - w0,
               write_bytes=b1 - b0)
    flag = "" if row["dirty_ok"] else f"  !! dirty off the expected count by {dev:+.1%}"
    print(f"  {mode:8} {scenario:6} {v:{W}} run {run}: dirty={dirty} (expected {expected}, "
          f"before {dirty_before}) written={row['written']} "
          f"write={row['write_s']:.3f}s total={row['total_s']:.3f}s "
          f"sort={benchlib.fmt(row['sort_s'])} "
          f"writes={row['writes']} bytes/write={row['write_bytes'] // max(row['writes'], 1)}"
          f"{flag}", flush=True)
    return row


def fio_bandwidth(directory):
    """The device's sequential direct-write bandwidth (MB/s) at 128 kB, at
    queue depth 1 (psync) and 8 (libaio): {"qd1": ..., "qd8": ...}; a queue
    depth whose fio run failed is left out, and all without fio."""
    if not shutil.which("fio"):
        return {}
    res = {}
    for key, engine, depth in (("qd1", "psync", 1), ("qd8", "libaio", 8)):
        r = subprocess.run(["fio", "--name=seqwrite", f"--directory={directory}", "--rw=write",
                            "--bs=128k", "--size=1G", "--direct=1", f"--ioengine={engine}",
                            # overwrite a laid-out file, as a checkpoint overwrites
                            # existing blocks: a fresh file measures block allocation
                            "--overwrite=1",
                            f"--iodepth={depth}", "--end_fsync=1", "--output-format=terse",
                            "--terse-version=3"], capture_output=True, text=True)
        try:
            # terse v3: field 48 is write bandwidth in KiB/s
            res[key] = int(r.stdout.strip().split(";")[47]) / 1024.0
        except (IndexError, ValueError):
            print(f"fio at queue depth {depth} ({engine}) failed: "
                  f"{(r.stderr or r.stdout).strip()[-300:]}", flush=True)
        for f in os.listdir(directory):
            if f.startswith("seqwrite"):
                os.unlink(os.path.join(directory, f))
    return res


def ckpt_mb_s(rows):
    """Checkpoint bandwidth of runs: median write_bytes / median total time, MB/s."""
    return benchlib.mb_s(med(rows, "write_bytes"), med(rows, "total_s"))


def table(rows, csv_path):
    print(f"medians of {RUNS} runs; ratios are variant/upstream of the medians; CSV: {csv_path}")
    hdr = (f"{'io':8} {'scen.':6} {'variant':{W}} {'dirty':>9} {'expected':>8} {'written':>8} "
           f"{'write s':>8} {'total s':>8} {'sort s':>7} {'writes':>8} {'B/write':>8} "
           f"{'MB/s':>7} {'write x':>8} {'total x':>8} {'writes x':>8}")
    print("\n".join(benchlib.ruled(hdr)))
    for mode, scenario in [(m, sc) for m in IO_MODES for sc in SCENARIOS]:
        sel = [r for r in rows if r["io"] == mode and r["scenario"] == scenario]
        base = [r for r in sel if r["variant"] == "upstream"]
        for v in VARIANTS:
            rs = [r for r in sel if r["variant"] == v]
            wr, tt, so = med(rs, "write_s"), med(rs, "total_s"), med(rs, "sort_s")
            n, b = med(rs, "writes"), med(rs, "write_bytes")
            flag = "" if all(r["dirty_ok"] for r in rs) else "!"

            def x(key):
                return benchlib.fmt(benchlib.ratio(med(rs, key), med(base, key) if base else None))
            print(f"{mode:8} {scenario:6} {v:{W}} {med(rs, 'dirty'):>8.0f}{flag:1} "
                  f"{med(rs, 'expected_dirty'):>8.0f} {med(rs, 'written'):>8.0f} "
                  f"{wr:>8.3f} {tt:>8.3f} {benchlib.fmt(so):>7} {n:>8.0f} "
                  f"{b / max(n, 1):>8.0f} {benchlib.fmt(ckpt_mb_s(rs), 0):>7} {x('write_s'):>8} "
                  f"{x('total_s'):>8} {x('writes'):>8}")
    print(f"dirty = dirty buffers before the CHECKPOINT, expected = the table's blocks (all) or "
          f"those holding an updated row (random), ! = a run off expected by more than "
          f"{TOLERANCE:.0%}; MB/s = write_bytes / total time; 'x' columns = variant median / "
          f"upstream median")


def fio_table(rows, fio, csv_path):
    """Every variant's checkpoint bandwidth (mb_s) as a fraction of fio's at
    queue depth 1 and 8; printed and written to csv_path."""
    qd1, qd8 = fio.get("qd1"), fio.get("qd8")
    print(f"device sequential write bandwidth (fio, 128 kB, direct, same run): "
          f"queue depth 1 (psync) {benchlib.fmt(qd1, 0)} MB/s, "
          f"queue depth 8 (libaio) {benchlib.fmt(qd8, 0)} MB/s")
    hdr = f"{'io':8} {'scen.':6} {'variant':{W}} {'MB/s':>7} {'x fio QD1':>9} {'x fio QD8':>9}"
    print("\n".join(benchlib.ruled(hdr)))
    out = []
    for mode, scenario in [(m, sc) for m in IO_MODES for sc in SCENARIOS]:
        for v in VARIANTS:
            rs = [r for r in rows if r["io"] == mode and r["scenario"] == scenario
                  and r["variant"] == v]
            if not rs:
                continue
            bw = ckpt_mb_s(rs)
            f1, f8 = benchlib.ratio(bw, qd1), benchlib.ratio(bw, qd8)
            print(f"{mode:8} {scenario:6} {v:{W}} {benchlib.fmt(bw, 0):>7} "
                  f"{benchlib.fmt(f1):>9} {benchlib.fmt(f8):>9}")
            out.append(dict(io=mode, scenario=scenario, variant=v,
                            mb_s=benchlib.round_or_none(bw, 1),
                            fio_qd1_mb_s=benchlib.round_or_none(qd1, 1),
                            fio_qd8_mb_s=benchlib.round_or_none(qd8, 1),
                            frac_qd1=benchlib.round_or_none(f1),
                            frac_qd8=benchlib.round_or_none(f8)))
    benchlib.write_csv(csv_path, FIO_FIELDS, out)
    print(f"MB/s = median write_bytes / median total time; 'x fio QDn' = MB/s / fio's MB/s at "
          f"queue depth n; CSV: {csv_path}")


def main():
    if not SCENARIOS:
        print("immediate checkpoint: no scenario selected (BENCH_SCENARIOS), skipped")
        return
    os.makedirs(OUT, exist_ok=True)
    sb = MB + 256 + MB // 4
    clusters = {}
    for i, name in enumerate(sorted({benchlib.cluster_of(v) for v in VARIANTS})):
        clusters[name] = Cluster(name, benchlib.port("immediate", i))
    print(f"immediate checkpoint: table {MB} MB ({ROWS} rows), shared_buffers {sb} MB, "
          f"{RUNS} runs, I/O {IO_MODES}, scenarios {SCENARIOS}, variants {VARIANTS}")
    print("clusters: " + ", ".join(f"{n} (io_method {benchlib.cluster_io_method(n)})"
                                   for n in clusters))
    print(f"machine: {benchlib.machine()}; data under {OUT}")
    mem = benchlib.mem_total_mb()
    if mem and sb * len(clusters) > 0.6 * mem:
        print(f"WARNING: {len(clusters)} clusters x shared_buffers {sb} MB = "
              f"{sb * len(clusters)} MB, more than 60% of MemTotal ({mem} MB); continuing",
              flush=True)
    expected = {}
    for c in clusters.values():
        c.init(sb)
        c.pg_ctl("start")
        expected[c.name] = c.load()
        c.pg_ctl("stop")
    if len({tuple(e.items()) for e in expected.values()}) != 1:
        sys.exit(f"the clusters' tables differ: expected dirty counts {expected}")
    expected = next(iter(expected.values()))
    print(f"expected dirty buffers per run: {expected}")

    csv_path = os.path.join(OUT, "immediate.csv")
    rows = []
    with benchlib.CsvOut(csv_path, FIELDS) as out:
        for mode in IO_MODES:
            for c in clusters.values():
                c.set_io(mode)
                c.pg_ctl("start")
                c.prewarm("bench")
            for scenario in SCENARIOS:
                for run in range(1, RUNS + 1):
                    for v in VARIANTS:
                        rows.append(one_run(clusters[benchlib.cluster_of(v)], v, mode,
                                            scenario, run, expected[scenario]))
                        out.write(rows[-1:])
            for c in clusters.values():
                c.pg_ctl("stop")

    fio = fio_bandwidth(OUT) if "direct" in IO_MODES else {}

    print()
    table(rows, csv_path)
    if fio:
        print()
        fio_table(rows, fio, os.path.join(OUT, "immediate-fio.csv"))
    off = [r for r in rows if not r["dirty_ok"]]
    if off:
        sys.exit(f"ERROR: {len(off)} run(s) dirtied not the expected number of buffers "
                 f"(more than {TOLERANCE:.0%} off; '!' above, dirty_ok = 0 in {csv_path}): " +
                 ", ".join(f"{r['io']}/{r['scenario']}/{r['variant']} run {r['run']}: "
                           f"{r['dirty']} vs {r['expected_dirty']}" for r in off))


if __name__ == "__main__":
    main()
