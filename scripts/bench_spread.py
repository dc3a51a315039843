#!/usr/bin/python3
"""Spread-checkpoint benchmark: pacing of WAL-triggered checkpoints.

pgbench (TPC-B-like, -M prepared) at a scale that fits in shared_buffers,
with max_wal_size small enough that checkpoints are triggered by WAL every
few tens of seconds, run against unpatched PostgreSQL and against each
checkpoint_wal_pacing mode of the patched server, with synchronous_commit
on and off, one after the other in one invocation, each on freshly
initialized pgbench tables with the same settings.

Recorded per second: tps and average latency (pgbench -P 1), the
checkpointer's write rate (write syscall bytes of the checkpointer process,
from /proc/PID/io, so it is exact and not delayed like the statistics), and
from the server log the checkpoints' start, write phase and end.  Sampled
transaction latencies (pgbench -l --sampling-rate) give p99 inside and
outside the write phases.

Output under work/bench/spread/: spread.csv (per second), summary.csv, one
PNG per synchronous_commit setting, and a table on stdout.

Environment (defaults in brackets):
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
from datetime import datetime

import benchlib

WORK = os.environ["WORK"]
OUT = os.path.join(WORK, "bench", "spread")
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
log_checkpoints = on
log_line_prefix = '%m [%p] '
autovacuum = off
""")


def parse_ts(s):
    return datetime.strptime(s[:23], "%Y-%m-%d %H:%M:%S.%f").timestamp()


START = re.compile(r"^(\S+ \S+) \S+ \[\d+\] LOG:  checkpoint starting: (.*)$")
DONE = re.compile(r"^(\S+ \S+) \S+ \[\d+\] LOG:  checkpoint complete: wrote (\d+) buffers.*"
                  r"write=([\d.]+) s, sync=([\d.]+) s, total=([\d.]+) s.*distance=(\d+) kB")


def checkpoints(logfile, offset, t0, t1):
    """(start, write_end, end, flags, buffers, distance_kB) of checkpoints in [t0, t1]."""
    with open(logfile, errors="replace") as f:
        f.seek(offset)
        lines = f.read().splitlines()
    res, cur = [], None
    for line in lines:
        m = START.match(line)
        if m:
            cur = (parse_ts(m.group(1)), m.group(2))
            continue
        m = DONE.match(line)
        if m and cur:
            end = parse_ts(m.group(1))
            total, write = float(m.group(5)), float(m.group(3))
            start = end - total
            res.append(dict(start=start, write_end=start + write, end=end, flags=cur[1],
                            buffers=int(m.group(2)), distance_kb=int(m.group(6))))
            cur = None
    if cur:
        # still running when the run ended: count it as writing until then
        res.append(dict(start=cur[0], write_end=t1, end=t1, flags=cur[1], buffers=0,
                        distance_kb=0))
    return [c for c in res if c["end"] >= t0 and c["start"] <= t1]


def sample_writes(pid, stop, samples):
    """Per-second write syscall bytes of the checkpointer."""
    path = f"/proc/{pid}/io"

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
        samples.append((now, cur - last))
        last, nxt = cur, nxt + 1


def run(c, variant, sync, writer, summary):
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
    logdir = os.path.join(OUT, f"txlog-{variant}-{sync}")
    shutil.rmtree(logdir, ignore_errors=True)
    os.makedirs(logdir)
    stop, samples = threading.Event(), []
    th = threading.Thread(target=sample_writes, args=(pid, stop, samples))
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
    # per-second progress lines: "progress: 12.0 s, 4567.8 tps, lat 0.875 ms stddev ..."
    prog = {}
    for line in p.stderr.splitlines():
        m = re.match(r"progress: ([\d.]+) s, ([\d.]+) tps, lat ([\d.]+) ms", line)
        if m:
            prog[int(float(m.group(1)))] = (float(m.group(2)), float(m.group(3)))
    ckpts = checkpoints(c.log, offset, t0, t1)
    wal_ckpts = [k for k in ckpts if "wal" in k["flags"]]

    def in_write(ts):
        return any(k["start"] <= ts < k["write_end"] for k in wal_ckpts)
    wrate = {int(round(ts - t0)): b for ts, b in samples}
    rows = []
    for sec in range(1, SECONDS + 1):
        tps, lat = prog.get(sec, (0.0, 0.0))
        ts = t0 + sec - 0.5
        rows.append(dict(variant=variant, sync=sync, second=sec, epoch=round(t0 + sec, 1),
                         tps=tps, lat_ms=lat,
                         ckpt_write_mb_s=round(wrate.get(sec, 0) / 1048576, 3),
                         in_write_phase=int(in_write(ts)),
                         in_checkpoint=int(any(k["start"] <= ts < k["end"] for k in ckpts))))
    for r in rows:
        writer.writerow(r)
    # transaction latencies, sampled: "client tx time_us script epoch us"
    lat_in, lat_out = [], []
    for fn in os.listdir(logdir):
        with open(os.path.join(logdir, fn)) as f:
            for line in f:
                parts = line.split()
                if len(parts) < 6:
                    continue
                lat_us = int(parts[2])
                end = int(parts[4]) + int(parts[5]) / 1e6
                (lat_in if in_write(end - lat_us / 1e6) else lat_out).append(lat_us / 1000)
    shutil.rmtree(logdir, ignore_errors=True)

    def pct(vals, q):
        if not vals:
            return None
        vals = sorted(vals)
        return vals[min(len(vals) - 1, int(q * len(vals)))]
    w = [r["ckpt_write_mb_s"] for r in rows if r["in_write_phase"]]
    # only seconds fully inside a write phase count for the write rate spread
    w_full = [r["ckpt_write_mb_s"] for r in rows
              if all(in_write(t0 + r["second"] - 1 + d) for d in (0.01, 0.99))]
    tps_ck = [r["tps"] for r in rows if r["in_write_phase"]]
    tps_all = [r["tps"] for r in rows]
    s = dict(variant=variant, sync=sync,
             tps=round(statistics.mean(tps_all), 1),
             wal_checkpoints=len([k for k in wal_ckpts if k["buffers"]]),
             write_rate_cov=round(statistics.pstdev(w_full) / statistics.mean(w_full), 3)
             if len(w_full) > 1 and statistics.mean(w_full) > 0 else None,
             tps_p5_over_median_in_ckpt=round(pct(tps_ck, 0.05) / statistics.median(tps_ck), 3)
             if tps_ck and statistics.median(tps_ck) > 0 else None,
             p99_ms_in_write=pct(lat_in, 0.99), p99_ms_outside=pct(lat_out, 0.99),
             peak_distance_mb=round(max([k["distance_kb"] for k in ckpts] or [0]) / 1024, 1),
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
    """Draw the PNGs again from spread.csv."""
    with open(os.path.join(OUT, "spread.csv")) as f:
        rows = list(csv.DictReader(f))
    for sync in dict.fromkeys(r["sync"] for r in rows):
        series = {}
        for r in rows:
            if r["sync"] == sync:
                series.setdefault(r["variant"], []).append(r)
        plot(sync, series)


def main():
    if sys.argv[1:] == ["--replot"]:
        replot()
        return
    os.makedirs(OUT, exist_ok=True)
    print(f"spread checkpoints: pgbench -M prepared -c {CLIENTS} scale {SCALE}, {SECONDS} s "
          f"(+{WARMUP} s warm-up) per run, max_wal_size {MAX_WAL}, shared_buffers 1GB; "
          f"machine: {os.cpu_count()} cores")
    clusters = {n: Cluster(n) for n in sorted({cluster_of(v) for v in VARIANTS})}
    for c in clusters.values():
        c.init()
        c.pg_ctl("start")
    summary = []
    with open(os.path.join(OUT, "spread.csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["variant", "sync", "second", "epoch", "tps",
                                               "lat_ms",
                                               "ckpt_write_mb_s", "in_write_phase",
                                               "in_checkpoint"])
        writer.writeheader()
        for sync in SYNCS:
            series = {}
            for v in VARIANTS:
                print(f"run: {v}, synchronous_commit={sync}", flush=True)
                rows, ckpts, t0 = run(clusters[cluster_of(v)], v, sync, writer, summary)
                series[v] = rows
                f.flush()
            plot(sync, series)
    for c in clusters.values():
        c.pg_ctl("stop")
    with open(os.path.join(OUT, "summary.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(summary[0].keys()))
        w.writeheader()
        w.writerows(summary)
    print()
    print(f"{'sync':5} {'variant':12} {'tps':>8} {'x upstr':>8} {'ckpts':>5} {'CoV wr':>7} "
          f"{'p5/med':>7} {'p99 in':>8} {'p99 out':>8} {'peak dist MB':>12}")
    for s in summary:
        base = [b for b in summary if b["sync"] == s["sync"] and b["variant"] == "upstream"]
        ratio = "%.3f" % (s["tps"] / base[0]["tps"]) if base and base[0]["tps"] else "-"
        print(f"{s['sync']:5} {s['variant']:12} {s['tps']:>8} {ratio:>8} {s['wal_checkpoints']:>5} "
              f"{str(s['write_rate_cov']):>7} {str(s['tps_p5_over_median_in_ckpt']):>7} "
              f"{str(s['p99_ms_in_write']):>8} {str(s['p99_ms_outside']):>8} "
              f"{s['peak_distance_mb']:>12}")
    print(f"max_wal_size = {MAX_WAL}; CoV wr = coefficient of variation of the checkpointer's "
          f"per-second write rate over seconds fully inside write phases; p5/med = 5th percentile "
          f"/ median of per-second tps in write phases; p99 = transaction latency (ms), 10% sample")


if __name__ == "__main__":
    main()
