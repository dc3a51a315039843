#!/usr/bin/python3
"""Peak size of pg_wal when WAL comes fast: does the series keep pg_wal
within max_wal_size with checkpoint_wal_pacing = off and compensated, as
unpatched PostgreSQL does (issue 23; target: the largest peak of off and
compensated at most 1.1 x upstream's)?

Server settings: max_wal_size BENCH_WALPEAK_MAX_WAL (128MB), min_wal_size
BENCH_WALPEAK_MIN_WAL (32MB), shared_buffers BENCH_WALPEAK_SHARED_BUFFERS
(512MB), checkpoint_timeout 1h (every checkpoint in a run is triggered by
WAL), checkpoint_completion_target 0.9, wal_compression off, autovacuum off,
log_checkpoints on, data checksums on.  Data: CREATE TABLE t (id int PRIMARY
KEY, n int, pad text) with BENCH_WALPEAK_ROWS rows (pad: 100 bytes), loaded
once per server (identical on both), VACUUM ANALYZE, pg_prewarm, CHECKPOINT.

A run of one variant: VACUUM t (the dead rows of the previous run go, so
that every run starts from a table of the same shape), the variant's
settings, CHECKPOINT; then BENCH_WALPEAK_SECONDS of random single-row updates
(pgbench -M prepared -n -c BENCH_WALPEAK_CLIENTS -j 2, `\\set id random(1,
ROWS)` / `UPDATE t SET n = n + 1 WHERE id = :id`), then one `UPDATE t SET n =
n + 1` of the whole table, which writes WAL as fast as it can.  From the
start of the random updates, a thread sums the sizes of the files in the
data directory's pg_wal every 0.1 s (what pg_ls_waldir() reports; a segment
renamed while listed counts once), until no checkpoint is running any more:
the server log (log_checkpoints) has as many "checkpoint complete" lines as
"checkpoint starting" lines since the start, and has kept it for 2 s (a
checkpoint requested while another ran starts as soon as that one ends).
Once the WAL stops, a WAL-triggered checkpoint still running is paced by
checkpoint_timeout (1h); pg_wal does not grow meanwhile (only a completed
checkpoint removes or recycles segments).  So if checkpoints still run
BENCH_WALPEAK_WAIT seconds after the whole-table update, a CHECKPOINT
hurries them (immediate) and ends the run; the row says so (forced = 1).

Variants (BENCH_WALPEAK_VARIANTS): "upstream" (work/inst-upstream, no
checkpoint_wal_pacing) and the modes of checkpoint_wal_pacing, run by the
patched server (work/inst-release): one cluster per build, both running
throughout (ports BENCH_PORT + 50 and + 51), the modes set in turn on the
patched one (ALTER SYSTEM, pg_reload_conf()).  "prev:MODE" runs MODE on the
previous build of the series in BENCH_PREV_INSTALL (README.md; port
BENCH_PORT + 52).  BENCH_SETTINGS (README.md) adds reloadable settings per
variant.  Runs are interleaved: run k runs every variant, in the listed order
rotated by k - 1.

Output: work/bench/walpeak-<date>.csv, one row per run and variant: run,
variant, start_mb (pg_wal's size, MB, at the start of the random updates:
mostly segments recycled for reuse), peak_mb (the largest sample), peak_at_s
(its time from the start of the random updates), wal_checkpoints
(checkpoints triggered by WAL that overlap the run), last_ckpt_s (seconds
from the start of the random updates until the last checkpoint completed),
forced, update_s (the whole-table update's duration), tps (of the random
updates); and work/bench/walpeak-<date>.txt, the table (also printed): per
variant the peaks run by run, their max and median, the median start_mb,
checkpoints and last_ckpt_s (of the runs not forced), and "max peak of off
and compensated / max peak of upstream".  Cluster data and server logs are
under work/bench/walpeak/.  With --table FILE.csv (and WORK set): print the
table again from that CSV.

`make bench-walpeak` runs this.  Environment (defaults in brackets;
BENCH_SETTINGS, BENCH_PREV_INSTALL and BENCH_PORT are described in
README.md):
  BENCH_WALPEAK_RUNS [5]               runs of every variant
  BENCH_WALPEAK_SECONDS [25]           seconds of random updates per run
  BENCH_WALPEAK_ROWS [1600000]         rows of t
  BENCH_WALPEAK_CLIENTS [4]            pgbench -c (-j 2)
  BENCH_WALPEAK_MAX_WAL [128MB]        max_wal_size
  BENCH_WALPEAK_MIN_WAL [32MB]         min_wal_size
  BENCH_WALPEAK_SHARED_BUFFERS [512MB]
  BENCH_WALPEAK_WAIT [5]               seconds to wait after the whole-table
                                       update for the checkpoints to finish
  BENCH_WALPEAK_VARIANTS ["upstream linear off compensated"]
"""

import os
import sys
import time

import benchlib
from benchlib import fmt

OUT = benchlib.bench_dir("walpeak")
(RUNS, SECONDS, ROWS, CLIENTS, MAX_WAL, MIN_WAL, SHARED_BUFFERS, WAIT,
 VARIANTS) = benchlib.settings(
    "BENCH_WALPEAK", RUNS=5, SECONDS=25, ROWS=1600000, CLIENTS=4, MAX_WAL="128MB",
    MIN_WAL="32MB", SHARED_BUFFERS="512MB", WAIT=5,
    VARIANTS=["upstream", "linear", "off", "compensated"])
MODES = ("linear", "off", "compensated")     # checkpoint_wal_pacing
TARGET = ("off", "compensated")     # the modes issue 23 is about, vs upstream
SAMPLE_S = 0.1          # pg_wal is sampled this often
SETTLE_S = 2.0          # no checkpoint running for this long: the run is over
PGBENCH = benchlib.pgbench_args(CLIENTS, min(2, CLIENTS))
FIELDS = ["run", "variant", "start_mb", "peak_mb", "peak_at_s", "wal_checkpoints", "last_ckpt_s",
          "forced", "update_s", "tps"]


class Cluster(benchlib.Cluster):
    def __init__(self, name):
        super().__init__(name, benchlib.build_port("walpeak", name), OUT)

    def init(self):
        super().init(f"""shared_buffers = {SHARED_BUFFERS}
max_wal_size = {MAX_WAL}
min_wal_size = {MIN_WAL}
checkpoint_timeout = 1h
checkpoint_completion_target = 0.9
wal_compression = off
autovacuum = off
{benchlib.LOG_SETTINGS}""")

    def load(self):
        """t with ROWS rows, vacuumed, analyzed, in shared_buffers, checkpointed."""
        self.psql("CREATE TABLE t (id int PRIMARY KEY, n int, pad text); "
                  f"INSERT INTO t SELECT g, 0, repeat('x', 100) FROM generate_series(1, {ROWS}) g")
        self.psql("VACUUM ANALYZE t")
        self.prewarm("t", "t_pkey")
        self.psql("CHECKPOINT")

    def configure(self, variant):
        self.set_settings(benchlib.variant_settings(variant,
                                                    implied=benchlib.pacing_settings(variant)))


class WalSampler(benchlib.Sampler):
    """A thread summing the sizes of the files in pg_wal every SAMPLE_S
    seconds (directories such as archive_status left out, a file renamed
    while listed counted once: by inode).  samples: (epoch, MB)."""

    def __init__(self, pg_wal):
        self.pg_wal = pg_wal
        super().__init__()

    def wal_mb(self):
        sizes = {}
        with os.scandir(self.pg_wal) as it:
            for e in it:
                try:
                    if e.is_file(follow_symlinks=False):
                        sizes[e.inode()] = e.stat(follow_symlinks=False).st_size
                except FileNotFoundError:   # removed or renamed meanwhile
                    pass
        return sum(sizes.values()) / 1048576

    def loop(self):
        nxt = time.time()
        while not self.stop_ev.is_set():
            self.samples.append((time.time(), self.wal_mb()))
            nxt += SAMPLE_S
            time.sleep(max(0, nxt - time.time()))


def checkpoint_running(logfile, offset):
    """Whether the log since byte 'offset' has more "checkpoint starting"
    than "checkpoint complete" lines."""
    lines = benchlib.log_lines(logfile, offset)
    return (sum(1 for x in lines if benchlib.START.match(x)) >
            sum(1 for x in lines if benchlib.DONE.match(x)))


def wait_checkpoints(c, offset, deadline):
    """Wait until no checkpoint has been running for SETTLE_S (True), or
    until time.time() passes 'deadline' (False)."""
    idle_since = None
    while time.time() < deadline:
        if checkpoint_running(c.log, offset):
            idle_since = None
        elif idle_since is None:
            idle_since = time.time()
        elif time.time() - idle_since >= SETTLE_S:
            return True
        time.sleep(0.2)
    return False


def one_run(c, variant, rep, script):
    c.psql("VACUUM t")
    c.configure(variant)
    c.psql("CHECKPOINT")
    offset = os.path.getsize(c.log)
    t0 = time.time()
    sampler = WalSampler(os.path.join(c.data, "pg_wal"))
    try:
        out = c.pgbench(*PGBENCH, "-T", str(SECONDS), "-f", script).stdout
        u0 = time.time()
        c.psql("UPDATE t SET n = n + 1")
        u1 = time.time()
        forced = not wait_checkpoints(c, offset, u1 + WAIT)
        if forced:
            c.psql("CHECKPOINT")
            wait_checkpoints(c, offset, time.time() + 60)
    finally:
        samples = sampler.stop()
    t1 = time.time()
    ckpts = [k for k in benchlib.checkpoints(c.log, offset, t0, t1) if k["complete"]]
    peak_t, peak = max(samples, key=lambda s: s[1])
    row = dict(run=rep, variant=variant, start_mb=round(samples[0][1], 1),
               peak_mb=round(peak, 1), peak_at_s=round(peak_t - t0, 1),
               wal_checkpoints=len(benchlib.of_kinds(ckpts, ("wal",))),
               last_ckpt_s=round(max(k["end"] for k in ckpts) - t0, 1) if ckpts else None,
               forced=int(forced), update_s=round(u1 - u0, 1),
               tps=benchlib.round_or_none(benchlib.pgbench_summary(out)["tps"], 1))
    benchlib.print_run(row)
    return row


def table(rows, header):
    """Per variant: the peaks run by run, their max and median; the ratio of
    issue 23."""
    variants = benchlib.variants_of(rows)
    runs = sorted({r["run"] for r in rows})
    w = max([12] + [len(v) for v in variants])
    pw = max(24, 7 * len(runs))
    lines = [header, ""] + benchlib.ruled(
        f"{'variant':{w}} {'peak pg_wal MB, run by run':{pw}} {'max':>7} "
        f"{'median':>7} {'start':>7} {'ckpts':>5} {'last ckpt s':>11} {'forced':>6}")
    peaks = {}
    for v in variants:
        rs = sorted((r for r in rows if r["variant"] == v), key=lambda r: r["run"])
        p = [r["peak_mb"] for r in rs]
        peaks[v] = max(p)
        med = {k: benchlib.med(rs, k) for k in ("start_mb", "wal_checkpoints")}
        med["last_ckpt_s"] = benchlib.median_of([r["last_ckpt_s"] for r in rs if not r["forced"]])
        lines.append(f"{v:{w}} {' '.join(f'{x:6.1f}' for x in p):{pw}} {max(p):7.1f} "
                     f"{benchlib.median_of(p):7.1f} {fmt(med['start_mb'], 1):>7} "
                     f"{fmt(med['wal_checkpoints'], 0):>5} "
                     f"{fmt(med['last_ckpt_s'], 1):>11} "
                     f"{sum(r['forced'] for r in rs):>6}")
    lines.append("")
    target = [peaks[v] for v in TARGET if v in peaks]
    if target and peaks.get("upstream"):
        lines.append(f"max peak of {' and '.join(v for v in TARGET if v in peaks)} / max peak "
                     f"of upstream = {max(target) / peaks['upstream']:.2f} "
                     f"(issue 23's target: <= 1.1)")
    else:
        lines.append("max peak of off and compensated / max peak of upstream: not measured "
                     "(needs upstream and off or compensated among the variants)")
    lines.append(f"peak = the largest size of pg_wal (its files, sampled every {SAMPLE_S} s from "
                 f"the start of the random updates until no checkpoint ran), max_wal_size = "
                 f"{MAX_WAL}; start = median size of pg_wal at the start (MB; mostly segments "
                 f"recycled for reuse); ckpts = median number of checkpoints triggered by WAL in "
                 f"a run; last ckpt s = median seconds from the start of the random updates until "
                 f"the last checkpoint completed, over the runs not forced; forced = runs whose "
                 f"checkpoints still ran {WAIT} s after the whole-table update and were "
                 f"finished by a CHECKPOINT")
    return "\n".join(lines)


def main():
    if not benchlib.main_start(table, VARIANTS, "BENCH_WALPEAK_VARIANTS"):
        return
    unknown = [v for v in VARIANTS if benchlib.base_variant(v) not in ("upstream",) + MODES]
    if unknown:
        sys.exit(f"BENCH_WALPEAK_VARIANTS: unknown variant(s) {unknown}: \"upstream\" or a "
                 f"checkpoint_wal_pacing mode ({' '.join(MODES)}), optionally \"prev:MODE\"")
    if RUNS < 1:
        sys.exit("BENCH_WALPEAK_RUNS: at least 1")
    os.makedirs(OUT, exist_ok=True)
    header = (f"pg_wal peak: {SECONDS} s of random single-row updates (pgbench -M prepared "
              f"-c {CLIENTS} -j {min(2, CLIENTS)}) on {ROWS} rows, then one whole-table UPDATE; "
              f"{RUNS} runs interleaved; max_wal_size {MAX_WAL}, min_wal_size {MIN_WAL}, "
              f"shared_buffers {SHARED_BUFFERS}, checkpoint_timeout 1h, wal_compression off; "
              f"machine: {benchlib.machine()}")
    print(header, flush=True)
    start = time.monotonic()
    script = os.path.join(OUT, "update.sql")
    with open(script, "w") as f:
        f.write(f"\\set id random(1, {ROWS})\nUPDATE t SET n = n + 1 WHERE id = :id;\n")
    clusters = {n: Cluster(n) for n in sorted({benchlib.cluster_of(v) for v in VARIANTS})}
    csv_path = benchlib.stamped_csv("walpeak")
    benchlib.exit_on_sigterm()     # the finally clause stops the servers
    rows = []
    try:
        for c in clusters.values():
            c.stop_if_running()     # left over from an interrupted run
            c.init()
            c.pg_ctl("start")
            print(f"loading {c.name} (port {c.port})", flush=True)
            c.load()
        with benchlib.CsvOut(csv_path, FIELDS) as out:
            for rep in range(1, RUNS + 1):
                for v in benchlib.rotated(VARIANTS, rep):
                    benchlib.say_run(rep, v)
                    rows.append(one_run(clusters[benchlib.cluster_of(v)], v, rep, script))
                    out.write(rows[-1:])
    finally:
        for c in clusters.values():
            c.stop_if_running()
    benchlib.report(table(rows, header), start, csv_path, csv_path[:-4] + ".txt")


if __name__ == "__main__":
    main()
