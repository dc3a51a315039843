#!/usr/bin/python3
"""Spread-checkpoint benchmark: pacing of WAL-triggered checkpoints.

pgbench (TPC-B-like, -M prepared) at a scale that fits in shared_buffers,
with max_wal_size small enough that checkpoints are triggered by WAL every
few tens of seconds, run against unpatched PostgreSQL and against each
checkpoint_wal_pacing mode of the patched server, with synchronous_commit
on and off, one after the other in one invocation, each on freshly
initialized pgbench tables with the same settings.  BENCH_SPREAD_RUNS
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

Front-load ratio: for each complete write phase of a WAL-triggered
checkpoint (inside the measured window, at least 8 s long), the
checkpointer's mean write rate over the first quarter of the phase / over
its second half, from the per-second write rates (each second weighted by
its overlap with the window).  1 = evenly spread, > 1 = front-loaded,
< 1 = back-loaded.  Per run: the median over the run's phases; per variant
and synchronous_commit setting: the median of the runs' medians (each run
counts once, whatever its number of phases).

Output under work/bench/spread/: spread.csv (per second), summary.csv (per
run), phases.csv (per rated write phase: start and length, mean rate of the
first quarter and of the second half, front-load ratio), one PNG per
synchronous_commit setting (the first repetition; each panel titled with
its run's front-load ratio), and a table on stdout.  --table prints the
table again from summary.csv, --replot draws the PNGs again.

`make bench-spread` runs this.  Environment (defaults in brackets; the
former names SPREAD_* are refused; BENCH_PORT is described in README.md):
  BENCH_SPREAD_RUNS [3]        repetitions of every variant and setting
  BENCH_SPREAD_SECONDS [120]   measured seconds per run
  BENCH_SPREAD_WARMUP [40]     unmeasured seconds first (a checkpoint cycle to
                               learn from)
  BENCH_SPREAD_SCALE [30]      pgbench scale
  BENCH_SPREAD_CLIENTS [4]     pgbench -c (-j 2)
  BENCH_SPREAD_MAX_WAL [640MB] max_wal_size
  BENCH_SPREAD_SYNC ["on off"] synchronous_commit settings
  BENCH_SPREAD_VARIANTS ["upstream linear off compensated"]   "upstream" or
                               a checkpoint_wal_pacing mode of the series;
                               "prev:MODE": that mode on the previous build
                               of the series in BENCH_PREV_INSTALL (README.md)
Ports: upstream runs on BENCH_PORT + 10, the patched server on BENCH_PORT + 11,
the previous build's (prev: variants) on BENCH_PORT + 12.
"""

import os
import shutil
import statistics
import sys
import time

import benchlib
from benchlib import fmt

OUT = benchlib.bench_dir("spread")
RUNS, SECONDS, WARMUP, SCALE, CLIENTS, MAX_WAL, SYNCS, VARIANTS = benchlib.settings(
    "BENCH_SPREAD", renamed_from="SPREAD", RUNS=3, SECONDS=120, WARMUP=40, SCALE=30,
    CLIENTS=4, MAX_WAL="640MB", SYNC=["on", "off"],
    VARIANTS=["upstream", "linear", "off", "compensated"])
KINDS = ("wal",)        # the checkpoints whose write phases count
FRONT_MIN_S = 8         # shorter write phases get no front-load ratio
PGBENCH = benchlib.pgbench_args(CLIENTS, 2)
SECOND_FIELDS = ["run", "variant", "sync", "second", "epoch", "tps", "lat_ms",
                 "ckpt_write_mb_s", "in_write_phase", "in_checkpoint"]
PHASE_FIELDS = ["run", "variant", "sync", "start_s", "write_s", "q1_mb_s", "h2_mb_s",
                "front_load"]


class Cluster(benchlib.Cluster):
    def __init__(self, name):
        super().__init__(name, benchlib.build_port("spread", name), OUT)

    def init(self):
        super().init(f"""shared_buffers = 1GB
max_wal_size = {MAX_WAL}
min_wal_size = 80MB
checkpoint_timeout = 30min
checkpoint_completion_target = 0.9
autovacuum = off
{benchlib.LOG_SETTINGS}""")

    def configure(self, variant, sync):
        self.set_settings({"synchronous_commit": sync, **benchlib.pacing_settings(variant)})

    def wal_stats(self):
        """(WAL bytes, full-page images) so far, from pg_stat_wal."""
        b, fpi = self.psql("SELECT wal_bytes || ' ' || wal_fpi FROM pg_stat_wal").split()
        return float(b), int(fpi)

    def checkpointer_pid(self):
        return int(self.psql("SELECT pid FROM pg_stat_activity "
                             "WHERE backend_type = 'checkpointer'"))


class WriteSampler(benchlib.Sampler):
    """A thread sampling, every second, the write syscall bytes of the
    checkpointer (/proc/PID/io wchar: exact and not delayed like the
    statistics) and the size of pg_wal (segment files, in MB: what a DBA's
    disk has to hold).  samples: (epoch, bytes in the last second, MB)."""

    def __init__(self, pid, pg_wal):
        self.path, self.pg_wal = f"/proc/{pid}/io", pg_wal
        super().__init__()

    def wal_mb(self):
        try:
            return sum(os.path.getsize(os.path.join(self.pg_wal, n))
                       for n in os.listdir(self.pg_wal) if len(n) == 24) / 1048576
        except OSError:     # a segment removed or renamed under us: skip it
            return 0

    def wchar(self):
        with open(self.path) as f:
            for line in f:
                if line.startswith("wchar:"):
                    return int(line.split()[1])
        return 0

    def loop(self):
        last = self.wchar()
        nxt = time.time() + 1
        while not self.stop_ev.is_set():
            time.sleep(max(0, nxt - time.time()))
            cur = self.wchar()
            self.samples.append((time.time(), cur - last, self.wal_mb()))
            last, nxt = cur, nxt + 1


def prepare(c, variant, sync):
    """Settings of the variant, fresh pgbench tables, a clean start."""
    c.configure(variant, sync)
    c.pgbench("-i", "-q", "-s", str(SCALE))
    c.psql("CHECKPOINT")


def measure(c, variant, sync):
    """The warm-up, then SECONDS of pgbench -P 1 -l while sampling the
    checkpointer's writes.  Returns what the analysis needs."""
    pid = c.checkpointer_pid()
    # from here, so that a checkpoint started during the warm-up is seen whole
    offset = os.path.getsize(c.log)
    if WARMUP:
        c.pgbench(*PGBENCH, "-T", str(WARMUP))
    wal0 = c.wal_stats()
    logdir = os.path.join(OUT, f"txlog-{benchlib.file_name(variant)}-{sync}")
    shutil.rmtree(logdir, ignore_errors=True)
    os.makedirs(logdir)
    sampler = WriteSampler(pid, os.path.join(c.data, "pg_wal"))
    t0 = time.time()
    try:
        p = c.pgbench(*PGBENCH, "-T", str(SECONDS), "-P", "1", "-l", "--sampling-rate=0.1",
                      "--log-prefix", os.path.join(logdir, "tx"))
    finally:
        t1 = time.time()
        samples = sampler.stop()
    # the statistics of the backends reach pg_stat_wal within a second
    time.sleep(1.5)
    wal1 = c.wal_stats()
    return dict(t0=t0, t1=t1, samples=samples, stdout=p.stdout, stderr=p.stderr,
                logdir=logdir, ckpts=benchlib.checkpoints(c.log, offset, t0, t1),
                wal_bytes=wal1[0] - wal0[0], wal_fpi=wal1[1] - wal0[1])


def per_second(rep, variant, sync, m, in_write):
    """One row per measured second; second s covers [t0 + s - 1, t0 + s)."""
    t0, ckpts, prog = m["t0"], m["ckpts"], benchlib.progress(m["stderr"])
    wrate = {int(round(ts - t0)): b for ts, b, _ in m["samples"]}
    rows = []
    for sec in range(1, SECONDS + 1):
        tps, lat = prog.get(sec, (0.0, 0.0))
        ts = t0 + sec - 0.5
        rows.append(dict(run=rep, variant=variant, sync=sync, second=sec, epoch=round(t0 + sec, 1),
                         tps=tps, lat_ms=lat,
                         ckpt_write_mb_s=round(wrate.get(sec, 0) / 1048576, 3),
                         in_write_phase=int(in_write(ts)),
                         in_checkpoint=int(any(k["start"] <= ts < k["end"] for k in ckpts))))
    return rows


def mean_rate(rows, t0, a, b):
    """Mean checkpointer write rate (MB/s) over [a, b): the per-second rates,
    each weighted by how much of its second lies in the window."""
    mb = sum(r["ckpt_write_mb_s"] * max(0.0, min(b, t0 + r["second"]) -
                                        max(a, t0 + r["second"] - 1)) for r in rows)
    return mb / (b - a)


def front_load(rep, variant, sync, rows, m):
    """Per complete write phase of a WAL-triggered checkpoint (inside the
    measured window, at least FRONT_MIN_S long): the mean write rate over its
    first quarter / over its second half (1 = even, > 1 = front-loaded)."""
    t0, phases = m["t0"], []
    for k in benchlib.of_kinds(m["ckpts"], KINDS):
        s, e = k["start"], k["write_end"]
        if not k["complete"] or s < t0 or e > t0 + SECONDS or e - s < FRONT_MIN_S:
            continue
        q1 = mean_rate(rows, t0, s, s + (e - s) / 4)
        h2 = mean_rate(rows, t0, s + (e - s) / 2, e)
        phases.append(dict(run=rep, variant=variant, sync=sync, start_s=round(s - t0, 1),
                           write_s=round(e - s, 1), q1_mb_s=round(q1, 3), h2_mb_s=round(h2, 3),
                           front_load=round(q1 / h2, 3) if h2 > 0 else None))
    return phases


def summarize(rep, variant, sync, rows, m, in_write, phases):
    """One summary row per run."""
    t0, ckpts, pct = m["t0"], m["ckpts"], benchlib.pct
    ntx = benchlib.pgbench_summary(m["stdout"])["transactions"] or 0
    # transaction latencies, sampled (one script)
    lat_in, lat_out = benchlib.tx_latencies(m["logdir"], in_write).get(0, ([], []))
    shutil.rmtree(m["logdir"], ignore_errors=True)
    w = [r["ckpt_write_mb_s"] for r in rows if r["in_write_phase"]]
    # only seconds fully inside a write phase count for the write rate spread
    w_full = [r["ckpt_write_mb_s"] for r in rows
              if all(in_write(t0 + r["second"] - 1 + d) for d in (0.01, 0.99))]
    tps_ck = [r["tps"] for r in rows if r["in_write_phase"]]
    return dict(run=rep, variant=variant, sync=sync,
                tps=round(statistics.mean(r["tps"] for r in rows), 1),
                wal_kb_per_tx=round(m["wal_bytes"] / 1024 / ntx, 3) if ntx else None,
                fpi_per_tx=round(m["wal_fpi"] / ntx, 3) if ntx else None,
                ckpt_buffers=sum(k["buffers"] for k in ckpts),
                wal_checkpoints=len([k for k in benchlib.of_kinds(ckpts, KINDS) if k["buffers"]]),
                write_rate_cov=round(statistics.pstdev(w_full) / statistics.mean(w_full), 3)
                if len(w_full) > 1 and statistics.mean(w_full) > 0 else None,
                front_load=benchlib.round_or_none(
                    benchlib.median_of([p["front_load"] for p in phases])),
                front_load_phases=len(phases),
                tps_p5_over_median_in_ckpt=round(pct(tps_ck, 0.05) / statistics.median(tps_ck), 3)
                if tps_ck and statistics.median(tps_ck) > 0 else None,
                p99_ms_in_write=pct(lat_in, 0.99), p99_ms_outside=pct(lat_out, 0.99),
                peak_distance_mb=round(max([k["distance_kb"] for k in ckpts] or [0]) / 1024, 1),
                peak_pg_wal_mb=round(max([x for _, _, x in m["samples"]] or [0]), 1),
                write_seconds=len(w))


def run(c, variant, sync, rep):
    """One run: (per-second rows, write phases rated, summary row)."""
    prepare(c, variant, sync)
    m = measure(c, variant, sync)
    in_write = benchlib.write_phase_test(m["ckpts"], KINDS)
    rows = per_second(rep, variant, sync, m, in_write)
    phases = front_load(rep, variant, sync, rows, m)
    s = summarize(rep, variant, sync, rows, m, in_write, phases)
    benchlib.print_run(s, skip=())
    return rows, phases, s


def plot(sync, series, front):
    """One PNG per synchronous_commit setting: a panel per variant, titled
    with its front-load ratio (front: variant -> (ratio, phases))."""
    if not benchlib.have_gnuplot():
        return
    png = os.path.join(OUT, f"spread-sync-{sync}.png")
    script = benchlib.multiplot_head(
        png, 300 * len(series), len(series),
        f"pgbench tps and checkpointer write rate, synchronous_commit={sync}, "
        f"max_wal_size={MAX_WAL} (shaded: checkpoint write phase, WAL-triggered)")
    script += ["set ylabel 'tps'", "set y2label 'checkpointer MB/s'", "set ytics nomirror",
               "set y2tics", "set xlabel 'seconds'", "set key top left",
               "set style fill transparent solid 0.15 noborder", "set yrange [0:*]",
               "set y2range [0:*]"]
    top = max(float(r["tps"]) for rows in series.values() for r in rows) * 1.1 or 1
    script.append(f"set yrange [0:{top:.0f}]")
    for variant, rows in series.items():
        dat = os.path.join(OUT, f"plot-{benchlib.file_name(variant)}-{sync}.dat")
        benchlib.write_dat(dat, rows, ("second", "tps", "ckpt_write_mb_s", "in_write_phase"))
        ratio, n = front.get(variant, (None, 0))
        script.append(f"set title '{variant}: front-load {fmt(ratio, 2)} (checkpointer write "
                      f"rate, first quarter / second half of a write phase; median of the {n} "
                      f"complete phases >= {FRONT_MIN_S} s)'")
        script.append(f"plot '{dat}' using 1:($4*{top:.0f}) with filledcurves y1=0 lc rgb 'orange' "
                      f"title 'write phase', '' using 1:2 with lines lw 1.5 lc rgb 'blue' "
                      f"title 'tps', '' using 1:3 axes x1y2 with steps lc rgb 'red' "
                      f"title 'checkpointer MB/s'")
    benchlib.gnuplot(script, png)


def replot():
    """Draw the PNGs again from spread.csv and summary.csv (the first repetition)."""
    rows = [r for r in benchlib.read_csv(os.path.join(OUT, "spread.csv")) if r["run"] == 1]
    summary = [s for s in benchlib.read_csv(os.path.join(OUT, "summary.csv")) if s["run"] == 1]
    for sync in dict.fromkeys(r["sync"] for r in rows):
        series = {}
        for r in rows:
            if r["sync"] == sync:
                series.setdefault(r["variant"], []).append(r)
        plot(sync, series, {s["variant"]: (s.get("front_load"), s.get("front_load_phases") or 0)
                            for s in summary if s["sync"] == sync})


def table(summary):
    """Medians over the repetitions, per synchronous_commit and variant."""
    w = max([12] + [len(s["variant"]) for s in summary])
    print()
    print(f"{'sync':5} {'variant':{w}} {'tps':>8} {'x upstr':>8} {'ckpts':>5} {'CoV wr':>7} "
          f"{'front':>6} {'p5/med':>7} {'p99 in':>8} {'p99 out':>8} {'peak dist MB':>12} "
          f"{'WAL kB/tx':>9} {'FPI/tx':>6} {'pg_wal MB':>9}")
    for sync in dict.fromkeys(s["sync"] for s in summary):
        for variant in dict.fromkeys(s["variant"] for s in summary):
            runs = [s for s in summary if s["sync"] == sync and s["variant"] == variant]
            if not runs:
                continue
            x = benchlib.median_ratio([s for s in summary if s["sync"] == sync], variant,
                                      "tps", same=("run", "sync"))
            m = {k: benchlib.median_of([s.get(k) for s in runs])
                 for k in ("tps", "wal_checkpoints", "write_rate_cov", "front_load",
                           "tps_p5_over_median_in_ckpt", "p99_ms_in_write", "p99_ms_outside",
                           "wal_kb_per_tx", "fpi_per_tx")}
            peak = max(s["peak_distance_mb"] for s in runs)
            peak_wal = max(s["peak_pg_wal_mb"] for s in runs)
            print(f"{sync:5} {variant:{w}} {fmt(m['tps'], 1):>8} {fmt(x):>8} "
                  f"{fmt(m['wal_checkpoints'], 0):>5} {fmt(m['write_rate_cov']):>7} "
                  f"{fmt(m['front_load'], 2):>6} "
                  f"{fmt(m['tps_p5_over_median_in_ckpt']):>7} {fmt(m['p99_ms_in_write']):>8} "
                  f"{fmt(m['p99_ms_outside']):>8} {peak:>12} {fmt(m['wal_kb_per_tx']):>9} "
                  f"{fmt(m['fpi_per_tx']):>6} {peak_wal:>9}")
    print(f"medians of {len({s['run'] for s in summary})} runs; x upstr = median of the tps "
          f"ratios to upstream within each run; peak dist (redo to redo) and pg_wal (size of "
          f"the segment files, sampled each second) = the largest over all runs; "
          f"max_wal_size = {MAX_WAL}; CoV wr = coefficient of variation of the checkpointer's "
          f"per-second write rate over seconds fully inside write phases; front = front-load "
          f"ratio: the checkpointer's mean write rate over the first quarter of a write phase / "
          f"over its second half (1 = even, > 1 = front-loaded), for each complete write phase "
          f"of a WAL-triggered checkpoint inside the measured window and at least "
          f"{FRONT_MIN_S} s long, median per run, then median of the runs' medians (per-phase "
          f"values in phases.csv); p5/med = 5th "
          f"percentile / median of per-second tps in write phases; p99 = transaction latency "
          f"(ms), 10% sample; WAL kB/tx and FPI/tx from pg_stat_wal")


def main():
    if sys.argv[1:] == ["--replot"]:
        replot()
        return
    if sys.argv[1:] == ["--table"]:
        table(benchlib.read_csv(os.path.join(OUT, "summary.csv")))
        return
    os.makedirs(OUT, exist_ok=True)
    print(f"spread checkpoints: pgbench -M prepared -c {CLIENTS} scale {SCALE}, {SECONDS} s "
          f"(+{WARMUP} s warm-up) per run, {RUNS} runs, max_wal_size {MAX_WAL}, "
          f"shared_buffers 1GB; machine: {benchlib.machine()}")
    clusters = {n: Cluster(n) for n in sorted({benchlib.cluster_of(v) for v in VARIANTS})}
    for c in clusters.values():
        c.init()
        c.pg_ctl("start")
    summary = []
    with benchlib.CsvOut(os.path.join(OUT, "spread.csv"), SECOND_FIELDS) as seconds_out, \
            benchlib.CsvOut(os.path.join(OUT, "phases.csv"), PHASE_FIELDS) as phases_out:
        for rep in range(1, RUNS + 1):
            for sync in SYNCS:
                # rotate the order so that no variant always runs first or last
                series, front = {}, {}
                for v in benchlib.rotated(VARIANTS, rep):
                    benchlib.say_run(rep, f"{v}, synchronous_commit={sync}")
                    rows, phases, s = run(clusters[benchlib.cluster_of(v)], v, sync, rep)
                    seconds_out.write(rows)
                    phases_out.write(phases)
                    summary.append(s)
                    series[v], front[v] = rows, (s["front_load"], s["front_load_phases"])
                benchlib.write_csv(os.path.join(OUT, "summary.csv"), list(summary[0]), summary)
                if rep == 1:
                    plot(sync, {v: series[v] for v in VARIANTS}, front)
    for c in clusters.values():
        c.pg_ctl("stop")
    table(summary)


if __name__ == "__main__":
    main()
