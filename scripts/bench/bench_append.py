#!/usr/bin/python3
"""Append-heavy pgbench: p99 latency of writers of hot pages during checkpoint
write phases, unpatched PostgreSQL vs the patch series.

Question: does the way the series writes (runs of contiguous dirty blocks in
one write) slow down backends that modify hot pages while a checkpoint is
writing them?  Workload, per run, on freshly initialized tables:
  - pgbench -b simple-update (= -N: UPDATE pgbench_accounts, SELECT, INSERT
    INTO pgbench_history) and
  - a custom script INSERTing into one append-only table, bench_append, with
    a btree index on a low-cardinality column (BENCH_APPEND_BUCKETS values):
    every insert goes to the heap's last page and to the last leaf page of
    its bucket's key range, so those pages stay hot for seconds (long enough
    to be dirty when a checkpoint starts and still hot when it writes them);
half the transactions each, pgbench -M prepared, BENCH_APPEND_CLIENTS
clients.  Data checksums on (full-page images after every checkpoint start),
shared_buffers 1GB (everything fits: the checkpointer does the writing),
autovacuum off, and a small checkpoint_timeout / max_wal_size so that every
run holds several checkpoints, spread (checkpoint_completion_target 0.9);
the patched server keeps its default pacing (checkpoint_wal_pacing).

Each variant has its own cluster (ports BENCH_PORT + 20, + 21, ...), with the same
settings; only one server runs at a time.  Runs are interleaved (upstream,
patched, upstream, patched, ...).  A run: start the server, pgbench -i,
create bench_append, pg_prewarm, CHECKPOINT, BENCH_APPEND_WARMUP seconds of
the workload, BENCH_APPEND_SECONDS measured seconds with pgbench -l, stop
the server.  The checkpoints' write phases come from the server log
(log_checkpoints; a write phase runs from "checkpoint starting" to start +
write= of its "checkpoint complete" line; WAL- and time-triggered
checkpoints).  A transaction counts as "in a write phase" when it started
in one.  While measuring, pg_stat_activity is sampled every 0.1 s for
client backends waiting on a buffer content lock (LWLock BufferContent).

Reported per run and variant (work/bench/append.csv) and as medians over the
runs (work/bench/append.txt, also printed): tps, checkpoints, p99 latency of
all transactions in write phases and outside them, p99 in write phases of
the INSERT script and of simple-update alone, p99 in write phases / p99
outside within each run (less sensitive to other load on the machine),
BufferContent waits per sample in and outside write phases, buffers written
by backends and the bgwriter (~0: the checkpointer writes), and the shares
of the machine's CPU time used by the server and pgbench and by anything
else (a run with other load is a noisy run); then the ratio patched /
upstream of the median p99 in write phases (target <= 1.05) and the ratios
within each run (run k of patched / run k of upstream).  Cluster data,
server logs and each variant's last pgbench logs are under
work/bench/append/.

`make bench` runs this after bench_immediate.py; BENCH_SCENARIOS selects:
"append" runs only this one, a list without "append" skips it, as does
BENCH_APPEND_RUNS=0.  Environment (defaults in brackets; BENCH_SCENARIOS,
BENCH_SETTINGS and BENCH_PORT are described in README.md):
  BENCH_APPEND_RUNS [3]         runs per variant
  BENCH_APPEND_SECONDS [60]     measured seconds per run
  BENCH_APPEND_WARMUP [15]      unmeasured seconds first
  BENCH_APPEND_CLIENTS [4]      pgbench -c (-j: min(clients, cores))
  BENCH_APPEND_SCALE [20]       pgbench scale
  BENCH_APPEND_BUCKETS [16]     distinct keys of bench_append's index
  BENCH_APPEND_MAX_WAL [512MB]  max_wal_size (~4 checkpoints a minute here)
  BENCH_APPEND_TIMEOUT [30s]    checkpoint_timeout
  BENCH_APPEND_SYNC [off]       synchronous_commit (off: latency is not
                                dominated by WAL flushes, lock waits show)
  BENCH_APPEND_IO [buffered]    or direct: debug_io_direct = 'data', every
                                checkpoint write waits for the device
  BENCH_APPEND_SAMPLING [1]     pgbench --sampling-rate of the -l log
  BENCH_APPEND_VARIANTS ["upstream patched"]   "upstream" runs
                                work/inst-upstream, any other name
                                work/inst-release with its BENCH_SETTINGS
                                (e.g. "patched:io_combine_limit=1");
                                "prev:NAME" runs NAME on BENCH_PREV_INSTALL
                                (README.md), e.g. "upstream patched prev:patched"
Default: 3 runs x 2 variants, about 9 minutes in all.  With --table [FILE.csv]
(and WORK set): print the table again from that CSV (default
work/bench/append.csv).
"""

import os
import shutil
import signal
import subprocess
import sys
import time

import benchlib
from benchlib import fmt, ratio

OUT = benchlib.bench_dir("append")
(RUNS, SECONDS, WARMUP, CLIENTS, SCALE, BUCKETS, MAX_WAL, TIMEOUT, SYNC, IO, SAMPLING,
 VARIANTS) = benchlib.settings(
    "BENCH_APPEND", RUNS=3, SECONDS=60, WARMUP=15, CLIENTS=4, SCALE=20, BUCKETS=16,
    MAX_WAL="512MB", TIMEOUT="30s", SYNC="off", IO="buffered", SAMPLING="1",
    VARIANTS=["upstream", "patched"])
JOBS = benchlib.pgbench_jobs(CLIENTS)
TARGET = 1.05
# checkpoints whose write phases count: triggered by WAL volume or by time
KINDS = ("wal", "time")
SCRIPTS = {0: "update", 1: "insert"}     # pgbench script numbers, in -b/-f order

INSERT_SCRIPT = f"""\\set aid random(1, 100000 * :scale)
\\set bucket random(1, {BUCKETS})
\\set delta random(-5000, 5000)
INSERT INTO bench_append (bucket, aid, delta, mtime) VALUES (:bucket, :aid, :delta, CURRENT_TIMESTAMP);
"""
SETUP = """DROP TABLE IF EXISTS bench_append;
CREATE TABLE bench_append (bucket int, aid int, delta int, mtime timestamp);
CREATE INDEX bench_append_bucket ON bench_append (bucket);
"""
SAMPLE = ("SELECT extract(epoch FROM clock_timestamp()), "
          "count(*) FILTER (WHERE wait_event = 'BufferContent') FROM pg_stat_activity "
          "WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() \\watch 0.1\n")
FIELDS = ["run", "variant", "tps", "transactions", "checkpoints", "write_phase_s",
          "p99_ms_in_write", "p99_ms_outside", "p99_ms_insert_in_write",
          "p99_ms_update_in_write", "p99_in_write_over_outside", "tx_in_write", "tx_outside",
          "bufcontent_waits_per_sample_in_write", "bufcontent_waits_per_sample_outside",
          "other_writes", "cpu_share", "other_cpu_share"]


class Cluster(benchlib.Cluster):
    def init(self):
        extra = benchlib.io_conf(IO) + benchlib.settings_conf(self.name)
        super().init(f"""shared_buffers = 1GB
max_wal_size = {MAX_WAL}
min_wal_size = 80MB
checkpoint_timeout = {TIMEOUT}
checkpoint_completion_target = 0.9
synchronous_commit = {SYNC}
autovacuum = off
{benchlib.LOG_SETTINGS}{extra}""")


class WaitSampler(benchlib.Sampler):
    """psql sampling pg_stat_activity every 0.1 s (\\watch): (epoch, number
    of client backends waiting on a buffer content lock)."""

    def __init__(self, c):
        self.p = c.session("-F", " ", stderr=subprocess.DEVNULL)
        self.p.stdin.write(SAMPLE)
        self.p.stdin.close()
        super().__init__()

    def loop(self):
        for line in self.p.stdout:
            parts = line.split()
            if len(parts) == 2:
                self.samples.append((float(parts[0]), int(parts[1])))

    def stop(self):
        # psql leaves \watch on SIGINT, then ends at the end of its input
        benchlib.reap(self.p, 10, signal.SIGINT)
        return super().stop()


def one_run(c, rep, position):
    """Run 'rep' on cluster c ('position': its place in the run's order, unused)."""
    c.pg_ctl("start")
    try:
        c.pgbench("-i", "-q", "-s", str(SCALE))
        c.psql(SETUP)
        c.prewarm(*benchlib.PGBENCH_RELATIONS)
        c.psql("CHECKPOINT")
        script = os.path.join(OUT, "insert.sql")
        with open(script, "w") as f:
            f.write(INSERT_SCRIPT)
        common = benchlib.pgbench_args(CLIENTS, JOBS) + ["-b", "simple-update", "-f", script]
        # from here, so that a checkpoint started during the warm-up is seen whole
        offset = os.path.getsize(c.log)
        if WARMUP:
            c.pgbench(*common, "-T", str(WARMUP))
        logdir = os.path.join(OUT, "txlog-" + benchlib.file_name(c.name))
        shutil.rmtree(logdir, ignore_errors=True)
        os.makedirs(logdir)
        other0 = c.other_writes()
        cpu = benchlib.CpuShares(c)
        sampler = WaitSampler(c)
        t0 = time.time()
        try:
            out = c.pgbench(*common, "-T", str(SECONDS), "-l", "--sampling-rate", SAMPLING,
                            "--log-prefix", os.path.join(logdir, "tx")).stdout
        finally:
            t1 = time.time()
            samples = sampler.stop()
        cpu_share, other_cpu_share = cpu.shares(t1 - t0)
        time.sleep(1.5)     # backends' I/O statistics reach pg_stat_io within a second
        other = c.other_writes() - other0
    finally:
        c.pg_ctl("stop")
    ckpts = benchlib.of_kinds(benchlib.checkpoints(c.log, offset, t0, t1), KINDS)
    in_write = benchlib.write_phase_test(ckpts, KINDS)
    lat = benchlib.tx_latencies(logdir, in_write)
    lat_in = [x for pair in lat.values() for x in pair[0]]
    lat_out = [x for pair in lat.values() for x in pair[1]]
    waits = ([w for ts, w in samples if in_write(ts)], [w for ts, w in samples if not in_write(ts)])
    pgb = benchlib.pgbench_summary(out)
    row = dict(run=rep, variant=c.name, tps=pgb["tps"],
               transactions=pgb["transactions"], checkpoints=len(ckpts),
               write_phase_s=benchlib.write_phase_seconds(ckpts, t0, t1),
               p99_ms_in_write=benchlib.pct(lat_in, 0.99),
               p99_ms_outside=benchlib.pct(lat_out, 0.99),
               tx_in_write=len(lat_in), tx_outside=len(lat_out),
               bufcontent_waits_per_sample_in_write=benchlib.round_or_none(
                   sum(waits[0]) / len(waits[0]) if waits[0] else None),
               bufcontent_waits_per_sample_outside=benchlib.round_or_none(
                   sum(waits[1]) / len(waits[1]) if waits[1] else None),
               other_writes=other, cpu_share=cpu_share, other_cpu_share=other_cpu_share)
    for num, name in SCRIPTS.items():
        row[f"p99_ms_{name}_in_write"] = benchlib.pct(lat.get(num, ([], []))[0], 0.99)
    # the write phases' own effect: other load on the machine hits both alike
    row["p99_in_write_over_outside"] = benchlib.round_or_none(ratio(row["p99_ms_in_write"],
                                                           row["p99_ms_outside"]))
    benchlib.print_run(row)
    return row


def table(rows, header):
    """The text table: medians per variant, ratios to upstream."""
    key = "p99_ms_in_write"
    cols = [("tps", "tps", 0), ("checkpoints", "ckpts", 0), ("write_phase_s", "wr s", 0),
            (key, "p99 wr", 3), ("p99_ms_outside", "p99 out", 3),
            ("p99_ms_insert_in_write", "ins wr", 3), ("p99_ms_update_in_write", "upd wr", 3),
            ("p99_in_write_over_outside", "wr/out", 3),
            ("bufcontent_waits_per_sample_in_write", "BufC wr", 3),
            ("bufcontent_waits_per_sample_outside", "BufC out", 3),
            ("other_writes", "oth.wr", 0), ("cpu_share", "cpu", 2),
            ("other_cpu_share", "oth.cpu", 2)]
    xcols = [(key, "x p99 wr"), ("p99_ms_outside", "x p99 out"), ("p99_ms_insert_in_write", "x ins wr"),
             ("p99_in_write_over_outside", "x wr/out")]
    runs = sorted({r["run"] for r in rows})
    med = benchlib.medians(rows, VARIANTS, [k for k, _, _ in cols])
    base = med.get("upstream")
    lines = [header, ""] + benchlib.ruled(f"{'variant':12} " + benchlib.col_heads(cols, 8) +
                                          " " + " ".join(f"{h:>9}" for _, h in xcols))
    for v in VARIANTS:
        lines.append(f"{v:12} " + benchlib.col_cells(med[v], cols, 8) + " " +
                     " ".join(f"{fmt(ratio(med[v][k], base[k]) if base else None):>9}"
                              for k, _ in xcols))
    lines += ["", "per run: p99 (ms) of the transactions that started in write phases "
                  "[share of the CPU taken by other load]"]
    for rep in runs:
        by = {r["variant"]: r for r in rows if r["run"] == rep}
        b = by.get("upstream", {}).get(key)
        lines.append(f"  run {rep}: " + ", ".join(
            f"{v} {fmt(by[v][key])} [{fmt(by[v]['other_cpu_share'], 2)}]" +
            ("" if v == "upstream" else f" (x {fmt(ratio(by[v][key], b))})")
            for v in VARIANTS if v in by))
    for v in VARIANTS:
        if v == "upstream" or not base:
            continue
        for k, what in ((key, "all transactions"), ("p99_ms_insert_in_write", "INSERT script"),
                        ("p99_in_write_over_outside", "all, / p99 outside in the same run")):
            r = ratio(med[v][k], base[k])
            per_run = benchlib.paired_ratios(rows, v, k)
            verdict = "-" if r is None else ("met" if r <= TARGET else "NOT met")
            lines.append(f"{v}/upstream, p99 in write phases, {what}: ratio of the medians "
                         f"{fmt(r)} (target <= {TARGET}: {verdict}); per run "
                         f"{benchlib.per_run_text(per_run)}")
    lines.append(f"medians of {len(runs)} runs.  p99 wr / out: latency (ms) of all transactions "
                 f"that started in / outside checkpoint write phases (WAL- or time-triggered); "
                 f"ins wr, upd wr: in write phases, the INSERT script, simple-update; wr/out: "
                 f"p99 wr / p99 out within each run (what the write phases add, with less "
                 f"of the noise of other load); BufC: "
                 f"client backends waiting on a buffer content lock, per 0.1 s sample; wr s: "
                 f"seconds of write phases in the measured window; oth.wr: buffers written by "
                 f"backends and the bgwriter; cpu, oth.cpu: share of the machine's CPU time "
                 f"used by the server and pgbench, by anything else (other load: a noisy run); "
                 f"x: variant median / upstream median")
    return "\n".join(lines)


def read_csv(path):
    rows = benchlib.read_csv(path)
    for r in rows:
        if "p99_in_write_over_outside" not in r:     # a CSV of an older version
            r["p99_in_write_over_outside"] = ratio(r["p99_ms_in_write"], r["p99_ms_outside"])
    return rows


def main():
    csv_path = benchlib.bench_dir("append.csv")
    if not benchlib.main_start(table, VARIANTS, "BENCH_APPEND_VARIANTS",
                               ("append", "append-heavy p99", RUNS, "BENCH_APPEND_RUNS"),
                               default=csv_path, read=read_csv):
        return
    if IO not in ("buffered", "direct"):
        sys.exit(f"BENCH_APPEND_IO: buffered or direct, not {IO}")
    header = (f"append-heavy pgbench: simple-update (-N) + INSERT into bench_append (index on "
              f"{BUCKETS} buckets), -M prepared -c {CLIENTS} -j {JOBS}, scale {SCALE}, "
              f"{SECONDS} s (+{WARMUP} s warm-up) per run, {RUNS} runs interleaved, "
              f"shared_buffers 1GB, max_wal_size {MAX_WAL}, checkpoint_timeout {TIMEOUT}, "
              f"synchronous_commit {SYNC}, {IO} I/O, log sampling {SAMPLING}; "
              f"machine: {benchlib.machine()}")
    clusters = [Cluster(v, benchlib.port("append", i), OUT) for i, v in enumerate(VARIANTS)]
    benchlib.run_and_report(header, clusters, RUNS, one_run, csv_path, FIELDS, table)


if __name__ == "__main__":
    main()
