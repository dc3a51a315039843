#!/usr/bin/python3
"""Spread-checkpoint benchmark: pacing of WAL-triggered checkpoints.

pgbench (TPC-B-like, -M prepared) at a scale that fits in shared_buffers,
with max_wal_size small enough that checkpoints are triggered by WAL every
few tens of seconds, run against unpatched PostgreSQL and against each
checkpoint_wal_pacing mode of the patched server, with synchronous_commit
on and off, one after the other in one invocation, each on freshly
initialized pgbench tables with the same settings.  SPREAD_RUNS
repetitions, interleaved, each in a rotated order of the variants so that
no variant always runs first or last; the table reports medians over the
repetitions, and tps ratios are the median of the ratios to upstream
within the same repetition.

Recorded per second: tps and average latency (pgbench -P 1), the
checkpointer's write rate (write syscall bytes of the checkpointer process,
from /proc/PID/io, so it is exact and not delayed like the statistics), and
from the server log the checkpoints' start, write phase and end.  Sampled
transaction latencies (pgbench -l --sampling-rate) give p99 inside and
outside the write phases.

Output under work/bench/spread/: spread.csv (per second), summary.csv (per
run), one PNG per synchronous_commit setting (the first repetition), and a
table on stdout.

Environment (defaults in brackets):
  SPREAD_RUNS [3]          repetitions of every variant and setting
  SPREAD_SECONDS [120]     measured seconds per run
  SPREAD_WARMUP [40]       unmeasured seconds first (a checkpoint cycle to learn from)
  SPREAD_SCALE [30]        pgbench scale
  SPREAD_CLIENTS [4]
  SPREAD_MAX_WAL [640MB]
  SPREAD_SYNC ["on off"]
  SPREAD_VARIANTS ["upstream linear off compensated"]
"""

import csv
import os
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time

import benchlib

WORK = os.environ["WORK"]
OUT = os.path.join(WORK, "bench", "spread")
RUNS = int(os.environ.get("SPREAD_RUNS", "3"))
SECONDS = int(os.environ.get("SPREAD_SECONDS", "120"))
WARMUP = int(os.environ.get("SPREAD_WARMUP", "40"))
SCALE = int(os.environ.get("SPREAD_SCALE", "30"))
CLIENTS = int(os.environ.get("SPREAD_CLIENTS", "4"))
MAX_WAL = os.environ.get("SPREAD_MAX_WAL", "640MB")
SYNCS = os.environ.get("SPREAD_SYNC", "on off").split()
VARIANTS = os.environ.get("SPREAD_VARIANTS", "upstream linear off compensated").split()
PREFIX = {"upstream": os.path.join(WORK, "inst-upstream"),
          "patched": os.path.join(WORK, "inst-release")}
PORT = {"upstream": 5610, "patched": 5611}


def cluster_of(v):
    return "upstream" if v == "upstream" else "patched"


class Cluster(benchlib.Cluster):
    def __init__(self, name):
        super().__init__(name, PREFIX[name], PORT[name], OUT)

    def init(self):
        super().init(f"""shared_buffers = 1GB
max_wal_size = {MAX_WAL}
min_wal_size = 80MB
checkpoint_timeout = 30min
checkpoint_completion_target = 0.9
autovacuum = off
{benchlib.LOG_SETTINGS}""")


def sample_writes(pid, stop, samples, pg_wal):
    """Per-second write syscall bytes of the checkpointer, and the size of
    pg_wal (segment files, in MB): what a DBA's disk has to hold."""
    path = f"/proc/{pid}/io"

    def wal_mb():
        try:
            return sum(os.path.getsize(os.path.join(pg_wal, n)) for n in os.listdir(pg_wal)
                       if len(n) == 24) / 1048576
        except OSError:     # a segment removed or renamed under us: skip it
            return 0

    def wchar():
        with open(path) as f:
            for line in f:
                if line.startswith("wchar:"):
                    return int(line.split()[1])
        return 0
    last = wchar()
    nxt = time.time() + 1
    while not stop.is_set():
        time.sleep(max(0, nxt - time.time()))
        now = time.time()
        cur = wchar()
        samples.append((now, cur - last, wal_mb()))
        last, nxt = cur, nxt + 1


def run(c, variant, sync, rep, writer, summary):
    c.psql("ALTER SYSTEM RESET ALL")
    c.psql(f"ALTER SYSTEM SET synchronous_commit = '{sync}'")
    if variant != "upstream":
        c.psql(f"ALTER SYSTEM SET checkpoint_wal_pacing = '{variant}'")
    c.psql("SELECT pg_reload_conf()")
    env = c.env()
    subprocess.run([c.bin("pgbench"), "-i", "-q", "-s", str(SCALE)], env=env, check=True,
                   capture_output=True)
    c.psql("CHECKPOINT")
    pid = int(c.psql("SELECT pid FROM pg_stat_activity WHERE backend_type = 'checkpointer'"))
    # from here, so that a checkpoint started during the warm-up is seen whole
    offset = os.path.getsize(c.log)
    if WARMUP:
        subprocess.run([c.bin("pgbench"), "-M", "prepared", "-c", str(CLIENTS), "-j", "2",
                        "-T", str(WARMUP), "-n"], env=env, check=True, capture_output=True)
    wal0 = c.psql("SELECT wal_bytes || ' ' || wal_fpi FROM pg_stat_wal").split()
    logdir = os.path.join(OUT, f"txlog-{variant}-{sync}")
    shutil.rmtree(logdir, ignore_errors=True)
    os.makedirs(logdir)
    stop, samples = threading.Event(), []
    th = threading.Thread(target=sample_writes,
                          args=(pid, stop, samples, os.path.join(c.data, "pg_wal")))
    th.start()
    t0 = time.time()
    p = subprocess.run([c.bin("pgbench"), "-M", "prepared", "-c", str(CLIENTS), "-j", "2",
                        "-T", str(SECONDS), "-n", "-P", "1", "-l", "--sampling-rate=0.1",
                        "--log-prefix", os.path.join(logdir, "tx")],
                       env=env, capture_output=True, text=True)
    t1 = time.time()
    stop.set()
    th.join()
    if p.returncode:
        sys.exit(f"pgbench failed: {p.stderr[-2000:]}")
    # the statistics of the backends reach pg_stat_wal within a second
    time.sleep(1.5)
    wal1 = c.psql("SELECT wal_bytes || ' ' || wal_fpi FROM pg_stat_wal").split()
    m = re.search(r"number of transactions actually processed: (\d+)", p.stdout)
    ntx = int(m.group(1)) if m else 0
    # per-second progress lines: "progress: 12.0 s, 4567.8 tps, lat 0.875 ms stddev ..."
    prog = {}
    for line in p.stderr.splitlines():
        m = re.match(r"progress: ([\d.]+) s, ([\d.]+) tps, lat ([\d.]+) ms", line)
        if m:
            prog[int(float(m.group(1)))] = (float(m.group(2)), float(m.group(3)))
    ckpts = benchlib.checkpoints(c.log, offset, t0, t1)
    wal_ckpts = [k for k in ckpts if "wal" in k["flags"]]
    in_write = benchlib.write_phase_test(ckpts, ("wal",))
    wrate = {int(round(ts - t0)): b for ts, b, _ in samples}
    rows = []
    for sec in range(1, SECONDS + 1):
        tps, lat = prog.get(sec, (0.0, 0.0))
        ts = t0 + sec - 0.5
        rows.append(dict(run=rep, variant=variant, sync=sync, second=sec, epoch=round(t0 + sec, 1),
                         tps=tps, lat_ms=lat,
                         ckpt_write_mb_s=round(wrate.get(sec, 0) / 1048576, 3),
                         in_write_phase=int(in_write(ts)),
                         in_checkpoint=int(any(k["start"] <= ts < k["end"] for k in ckpts))))
    for r in rows:
        writer.writerow(r)
    # transaction latencies, sampled (one script)
    lat_in, lat_out = benchlib.tx_latencies(logdir, in_write).get(0, ([], []))
    shutil.rmtree(logdir, ignore_errors=True)
    pct = benchlib.pct
    w = [r["ckpt_write_mb_s"] for r in rows if r["in_write_phase"]]
    # only seconds fully inside a write phase count for the write rate spread
    w_full = [r["ckpt_write_mb_s"] for r in rows
              if all(in_write(t0 + r["second"] - 1 + d) for d in (0.01, 0.99))]
    tps_ck = [r["tps"] for r in rows if r["in_write_phase"]]
    tps_all = [r["tps"] for r in rows]
    s = dict(run=rep, variant=variant, sync=sync,
             tps=round(statistics.mean(tps_all), 1),
             wal_kb_per_tx=round((float(wal1[0]) - float(wal0[0])) / 1024 / ntx, 3)
             if ntx else None,
             fpi_per_tx=round((int(wal1[1]) - int(wal0[1])) / ntx, 3) if ntx else None,
             ckpt_buffers=sum(k["buffers"] for k in ckpts),
             wal_checkpoints=len([k for k in wal_ckpts if k["buffers"]]),
             write_rate_cov=round(statistics.pstdev(w_full) / statistics.mean(w_full), 3)
             if len(w_full) > 1 and statistics.mean(w_full) > 0 else None,
             tps_p5_over_median_in_ckpt=round(pct(tps_ck, 0.05) / statistics.median(tps_ck), 3)
             if tps_ck and statistics.median(tps_ck) > 0 else None,
             p99_ms_in_write=pct(lat_in, 0.99), p99_ms_outside=pct(lat_out, 0.99),
             peak_distance_mb=round(max([k["distance_kb"] for k in ckpts] or [0]) / 1024, 1),
             peak_pg_wal_mb=round(max(w for _, _, w in samples), 1),
             write_seconds=len(w))
    summary.append(s)
    print("  " + ", ".join(f"{k}={v}" for k, v in s.items()), flush=True)
    return rows, ckpts, t0


def plot(sync, series):
    """One PNG per synchronous_commit setting: a panel per variant."""
    if not shutil.which("gnuplot"):
        print("gnuplot not installed: no plots")
        return
    png = os.path.join(OUT, f"spread-sync-{sync}.png")
    script = [f"set terminal pngcairo noenhanced size 1400,{300 * len(series)} font ',9'",
              f"set output '{png}'",
              f"set multiplot layout {len(series)},1 title "
              f"'pgbench tps and checkpointer write rate, synchronous_commit={sync}, "
              f"max_wal_size={MAX_WAL} (shaded: checkpoint write phase, WAL-triggered)'",
              "set ylabel 'tps'", "set y2label 'checkpointer MB/s'", "set ytics nomirror",
              "set y2tics", "set xlabel 'seconds'", "set key top left",
              "set style fill transparent solid 0.15 noborder", "set yrange [0:*]",
              "set y2range [0:*]"]
    top = max(float(r["tps"]) for rows in series.values() for r in rows) * 1.1 or 1
    script.append(f"set yrange [0:{top:.0f}]")
    for variant, rows in series.items():
        dat = os.path.join(OUT, f"plot-{variant}-{sync}.dat")
        with open(dat, "w") as f:
            for r in rows:
                f.write(f"{r['second']} {r['tps']} {r['ckpt_write_mb_s']} {r['in_write_phase']}\n")
        script.append(f"set title '{variant}'")
        script.append(f"plot '{dat}' using 1:($4*{top:.0f}) with filledcurves y1=0 lc rgb 'orange' "
                      f"title 'write phase', '' using 1:2 with lines lw 1.5 lc rgb 'blue' "
                      f"title 'tps', '' using 1:3 axes x1y2 with steps lc rgb 'red' "
                      f"title 'checkpointer MB/s'")
    script.append("unset multiplot")
    subprocess.run(["gnuplot"], input="\n".join(script), text=True, check=True)
    print(f"plot: {png}")


def replot():
    """Draw the PNGs again from spread.csv (the first repetition)."""
    with open(os.path.join(OUT, "spread.csv")) as f:
        rows = [r for r in csv.DictReader(f) if r.get("run", "1") == "1"]
    for sync in dict.fromkeys(r["sync"] for r in rows):
        series = {}
        for r in rows:
            if r["sync"] == sync:
                series.setdefault(r["variant"], []).append(r)
        plot(sync, series)


def table(summary):
    """Medians over the repetitions, per synchronous_commit and variant."""
    print()
    print(f"{'sync':5} {'variant':12} {'tps':>8} {'x upstr':>8} {'ckpts':>5} {'CoV wr':>7} "
          f"{'p5/med':>7} {'p99 in':>8} {'p99 out':>8} {'peak dist MB':>12} {'WAL kB/tx':>9} "
          f"{'FPI/tx':>6} {'pg_wal MB':>9}")
    fmt = (lambda v, d=3: "-" if v is None else f"{v:.{d}f}")
    for sync in dict.fromkeys(s["sync"] for s in summary):
        for variant in dict.fromkeys(s["variant"] for s in summary):
            runs = [s for s in summary if s["sync"] == sync and s["variant"] == variant]
            if not runs:
                continue
            ratios = []
            for s in runs:
                base = [b for b in summary if b["sync"] == sync and b["run"] == s["run"]
                        and b["variant"] == "upstream"]
                if base and base[0]["tps"]:
                    ratios.append(s["tps"] / base[0]["tps"])
            m = {k: benchlib.median_of([s[k] for s in runs])
                 for k in ("tps", "wal_checkpoints", "write_rate_cov",
                           "tps_p5_over_median_in_ckpt", "p99_ms_in_write", "p99_ms_outside",
                           "wal_kb_per_tx", "fpi_per_tx")}
            peak = max(s["peak_distance_mb"] for s in runs)
            peak_wal = max(s["peak_pg_wal_mb"] for s in runs)
            print(f"{sync:5} {variant:12} {fmt(m['tps'], 1):>8} {fmt(benchlib.median_of(ratios)):>8} "
                  f"{fmt(m['wal_checkpoints'], 0):>5} {fmt(m['write_rate_cov']):>7} "
                  f"{fmt(m['tps_p5_over_median_in_ckpt']):>7} {fmt(m['p99_ms_in_write']):>8} "
                  f"{fmt(m['p99_ms_outside']):>8} {peak:>12} {fmt(m['wal_kb_per_tx']):>9} "
                  f"{fmt(m['fpi_per_tx']):>6} {peak_wal:>9}")
    print(f"medians of {len({s['run'] for s in summary})} runs; x upstr = median of the tps "
          f"ratios to upstream within each run; peak dist (redo to redo) and pg_wal (size of "
          f"the segment files, sampled each second) = the largest over all runs; "
          f"max_wal_size = {MAX_WAL}; CoV wr = coefficient of variation of the checkpointer's "
          f"per-second write rate over seconds fully inside write phases; p5/med = 5th "
          f"percentile / median of per-second tps in write phases; p99 = transaction latency "
          f"(ms), 10% sample; WAL kB/tx and FPI/tx from pg_stat_wal")


def main():
    if sys.argv[1:] == ["--replot"]:
        replot()
        return
    if sys.argv[1:] == ["--table"]:
        with open(os.path.join(OUT, "summary.csv")) as f:
            summary = []
            for r in csv.DictReader(f):
                for k, v in r.items():
                    if k not in ("variant", "sync"):
                        r[k] = None if v == "" else float(v)
                summary.append(r)
        table(summary)
        return
    os.makedirs(OUT, exist_ok=True)
    print(f"spread checkpoints: pgbench -M prepared -c {CLIENTS} scale {SCALE}, {SECONDS} s "
          f"(+{WARMUP} s warm-up) per run, {RUNS} runs, max_wal_size {MAX_WAL}, "
          f"shared_buffers 1GB; machine: {os.cpu_count()} cores")
    clusters = {n: Cluster(n) for n in sorted({cluster_of(v) for v in VARIANTS})}
    for c in clusters.values():
        c.init()
        c.pg_ctl("start")
    summary = []
    with open(os.path.join(OUT, "spread.csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["run", "variant", "sync", "second", "epoch",
                                               "tps", "lat_ms",
                                               "ckpt_write_mb_s", "in_write_phase",
                                               "in_checkpoint"])
        writer.writeheader()
        for rep in range(1, RUNS + 1):
            for sync in SYNCS:
                # rotate the order so that no variant always runs first or last
                k = (rep - 1) % len(VARIANTS)
                series = {}
                for v in VARIANTS[k:] + VARIANTS[:k]:
                    print(f"run {rep}: {v}, synchronous_commit={sync}", flush=True)
                    rows, ckpts, t0 = run(clusters[cluster_of(v)], v, sync, rep, writer,
                                          summary)
                    series[v] = rows
                    f.flush()
                with open(os.path.join(OUT, "summary.csv"), "w", newline="") as sf:
                    w = csv.DictWriter(sf, fieldnames=list(summary[0].keys()))
                    w.writeheader()
                    w.writerows(summary)
                if rep == 1:
                    plot(sync, {v: series[v] for v in VARIANTS})
    for c in clusters.values():
        c.pg_ctl("stop")
    table(summary)


if __name__ == "__main__":
    main()
