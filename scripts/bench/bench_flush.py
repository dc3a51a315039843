#!/usr/bin/python3
"""FlushBuffer-heavy pgbench: throughput when backends and the background
writer, not the checkpointer, write the dirty buffers; unpatched PostgreSQL
vs the patch series.

Workload: pgbench TPC-B-like (-M prepared) at scale BENCH_FLUSH_SCALE (50:
~750 MB) with shared_buffers BENCH_FLUSH_SHARED_BUFFERS (16MB): nearly every
buffer a backend needs is a victim to evict, and many victims are dirty, so
backends and the bgwriter write them out (FlushBuffer).  Checkpoints stay
out of the way (checkpoint_timeout 30min, max_wal_size 4GB; the table
shows how many ran), synchronous_commit = off so that WAL flushes at commit
do not dominate, autovacuum off, data checksums on.

Each variant has its own cluster (ports BENCH_PORT + 30, + 31, ...), with
the same settings; only one server runs at a time.  Runs are interleaved
(upstream, patched, upstream, patched, ...).  A run: start the server,
pgbench -i (identical data for every run and variant), CHECKPOINT,
BENCH_FLUSH_WARMUP seconds of the workload, pg_stat_reset_shared('io'),
BENCH_FLUSH_SECONDS measured seconds, then pg_stat_io (object relation,
context normal): writes and write_bytes of the client backends, the
background writer and the checkpointer; stop the server.

Output: work/bench/flush-<date>.csv (one row per run) and
work/bench/flush-<date>.txt, the table (also printed): medians per variant
of tps, average latency, writes and MB written per backend type, bytes per
write, checkpoints; the patched/upstream tps ratio is the median of the
ratios within each run (run k of patched / run k of upstream).  Cluster
data and server logs are under work/bench/flush/.

`make bench` runs this after bench_immediate.py and bench_append.py;
BENCH_SCENARIOS selects: "flush" runs only this one, a list without "flush"
skips it, as does BENCH_FLUSH_RUNS=0.  Environment (defaults in brackets;
BENCH_SCENARIOS, BENCH_SETTINGS and BENCH_PORT are described in README.md):
  BENCH_FLUSH_RUNS [3]            runs per variant
  BENCH_FLUSH_SECONDS [60]        measured seconds per run
  BENCH_FLUSH_WARMUP [10]         unmeasured seconds first
  BENCH_FLUSH_CLIENTS [4]         pgbench -c (-j: min(clients, cores))
  BENCH_FLUSH_SCALE [50]          pgbench scale
  BENCH_FLUSH_SHARED_BUFFERS [16MB]
  BENCH_FLUSH_VARIANTS ["upstream patched"]   "upstream" runs
                                  work/inst-upstream, any other name
                                  work/inst-release with its BENCH_SETTINGS;
                                  "prev:NAME" runs NAME on BENCH_PREV_INSTALL
                                  (README.md)
With --table FILE.csv (and WORK set): print the table again from that CSV.
"""

import time

import benchlib
from benchlib import fmt

OUT = benchlib.bench_dir("flush")
RUNS, SECONDS, WARMUP, CLIENTS, SCALE, SHARED_BUFFERS, VARIANTS = benchlib.settings(
    "BENCH_FLUSH", RUNS=3, SECONDS=60, WARMUP=10, CLIENTS=4, SCALE=50, SHARED_BUFFERS="16MB",
    VARIANTS=["upstream", "patched"])
JOBS = benchlib.pgbench_jobs(CLIENTS)
# pg_stat_io backend types -> column prefixes
WRITERS = {"client backend": "backend", "background writer": "bgwriter",
           "checkpointer": "ckpt"}
FIELDS = (["run", "variant", "tps", "lat_ms", "transactions", "checkpoints"] +
          [f"{p}_{k}" for p in WRITERS.values() for k in ("writes", "write_bytes")])


class Cluster(benchlib.Cluster):
    def init(self):
        super().init(f"""shared_buffers = {SHARED_BUFFERS}
max_wal_size = 4GB
min_wal_size = 1GB
checkpoint_timeout = 30min
synchronous_commit = off
autovacuum = off
{benchlib.LOG_SETTINGS}{benchlib.settings_conf(self.name)}""")


def one_run(c, rep, position):
    """Run 'rep' on cluster c ('position': its place in the run's order, unused)."""
    c.pg_ctl("start")
    try:
        c.pgbench("-i", "-q", "-s", str(SCALE))
        c.psql("CHECKPOINT")
        common = benchlib.pgbench_args(CLIENTS, JOBS)
        if WARMUP:
            c.pgbench(*common, "-T", str(WARMUP))
        c.psql("SELECT pg_stat_reset_shared('io')")
        ck0 = c.checkpoints_done()
        out = c.pgbench(*common, "-T", str(SECONDS)).stdout
        time.sleep(1.5)     # the bgwriter's I/O statistics reach pg_stat_io within a second
        io = c.io_writes(WRITERS)
        checkpoints = c.checkpoints_done() - ck0
    finally:
        c.pg_ctl("stop")
    row = dict(run=rep, variant=c.name, **benchlib.pgbench_summary(out), checkpoints=checkpoints)
    for bt, p in WRITERS.items():
        row[f"{p}_writes"], row[f"{p}_write_bytes"] = io[bt]
    benchlib.print_run(row)
    return row


def table(rows, header):
    """Medians per variant; the tps ratio to upstream within each run."""
    variants = benchlib.variants_of(rows)
    cols = [("tps", "tps", 0), ("lat_ms", "lat ms", 3), ("checkpoints", "ckpts", 0)]
    for p, name in (("backend", "bknd"), ("bgwriter", "bgwr"), ("ckpt", "ckpt")):
        cols += [(f"{p}_writes", f"{name} wr", 0), (f"{p}_write_bytes", f"{name} MB", 0),
                 (f"{p}_bpw", f"{name} B/wr", 0)]
    for r in rows:
        for p in ("backend", "bgwriter", "ckpt"):
            r[f"{p}_bpw"] = benchlib.ratio(r[f"{p}_write_bytes"], r[f"{p}_writes"])
    med = benchlib.medians(rows, variants, [k for k, _, _ in cols])
    for v in variants:
        for p in ("backend", "bgwriter", "ckpt"):
            b = med[v][f"{p}_write_bytes"]
            med[v][f"{p}_write_bytes"] = None if b is None else b / 1048576
    lines = [header, ""] + benchlib.ruled(f"{'variant':12} " + benchlib.col_heads(cols, 10) +
                                          f" {'x tps':>7}")
    for v in variants:
        x = None if v == "upstream" else benchlib.median_ratio(rows, v, "tps")
        lines.append(f"{v:12} " + benchlib.col_cells(med[v], cols, 10) + f" {fmt(x):>7}")
    lines.append("")
    for v in variants:
        if v != "upstream":
            lines.append(f"{v}/upstream tps per run: "
                         f"{benchlib.per_run_text(benchlib.paired_ratios(rows, v, 'tps'))}")
    lines.append(f"medians of {len({r['run'] for r in rows})} runs.  bknd, bgwr, ckpt: client "
                 f"backends, background writer, checkpointer (pg_stat_io, object relation, "
                 f"context normal, reset before each measured period): wr = writes (I/Os), "
                 f"MB = write_bytes, B/wr = bytes per write; ckpts = checkpoints completed in "
                 f"the measured period; x tps = median of the per-run ratios variant / upstream")
    return "\n".join(lines)


def main():
    if not benchlib.main_start(table, VARIANTS, "BENCH_FLUSH_VARIANTS",
                               ("flush", "FlushBuffer-heavy pgbench", RUNS, "BENCH_FLUSH_RUNS")):
        return
    header = (f"FlushBuffer-heavy pgbench: TPC-B-like, -M prepared -c {CLIENTS} -j {JOBS}, "
              f"scale {SCALE}, shared_buffers {SHARED_BUFFERS}, {SECONDS} s (+{WARMUP} s "
              f"warm-up) per run, {RUNS} runs interleaved, synchronous_commit off, "
              f"checkpoint_timeout 30min, max_wal_size 4GB; machine: {benchlib.machine()}")
    clusters = [Cluster(v, benchlib.port("flush", i), OUT) for i, v in enumerate(VARIANTS)]
    benchlib.run_and_report(header, clusters, RUNS, one_run, benchlib.stamped_csv("flush"),
                            FIELDS, table)


if __name__ == "__main__":
    main()
