#!/usr/bin/python3
"""Cleanup-lock waits under spread checkpoints: how long VACUUM waits for
buffer pins (wait event BufferPin) while the checkpointer writes, unpatched
PostgreSQL vs the patch series, per I/O mode and io_method.

Question: the series writes checkpoint buffers in runs of contiguous blocks,
asynchronously (several writes in flight, checkpoint_io_concurrency), and
every buffer of a run stays pinned until its write completes; unpatched 18.6
pins one buffer for one synchronous 8 kB write.  VACUUM needs a cleanup lock
(no pin but its own) on the heap pages it prunes or freezes and on the btree
leaf pages it scans: does it wait longer for those pins under the series?

Workload: pgbench TPC-B-like (-M prepared, BENCH_CLEANUP_CLIENTS clients) at
scale BENCH_CLEANUP_SCALE (20: ~300 MB) with shared_buffers
BENCH_CLEANUP_SHARED_BUFFERS (512MB): the data is pg_prewarm'ed and fits, so
the checkpointer, not evictions, writes (the table shows the buffers that
backends and the bgwriter wrote: ~0).  Alongside, one psql session runs
VACUUM (FREEZE, INDEX_CLEANUP ON) on pgbench_accounts, pgbench_branches and
pgbench_tellers, over and over, back to back, timing each (psql \timing).
FREEZE makes the VACUUM aggressive: a page with tuples to freeze that
someone else has pinned is waited for (wait event BufferPin), not skipped.
INDEX_CLEANUP ON keeps it from bypassing index vacuuming when there are
dead items.  Back to back, each VACUUM of pgbench_accounts visits mostly the
pages changed since the previous one (the visibility map skips the others):
the dirty pages, which are those the checkpointer writes.
Another psql session samples pg_stat_activity every BENCH_CLEANUP_SAMPLE_MS
(5) ms for sessions with wait_event = 'BufferPin'; the waiting sessions of
each sample times the time since the previous sample (5 ms nominal), summed,
is the "BufferPin wait time (sampled)", in all and for the pgbench_accounts
VACUUMs alone.  pgbench_branches (one page) and pgbench_tellers are pinned
by pgbench's own backends nearly all the time: their waits are mostly not
the checkpointer's, hence the separate accounts figures.  The same samples
give the pgbench_accounts VACUUM's time per wait event (what else than
BufferPin it waits for, e.g. BufferContent or BufferIo; "CPU": active
without a wait event).

Spread checkpoints: timed only, checkpoint_timeout BENCH_CLEANUP_TIMEOUT
(30s, the minimum) with checkpoint_completion_target 0.9 and max_wal_size
4GB (never reached: every checkpoint is a timed one, at a fixed pace, the
same for every variant whatever its throughput).  The measured period starts
when a timed checkpoint starts (the server log is watched), so with the
default 60 s it holds two spread checkpoints of ~27 s write phase each, both
completed in it, and the checkpointer is writing ~90% of the time; a third
starts as the period ends.  BENCH_CLEANUP_SECONDS=120 holds four.  Data
checksums on (initdb --data-checksums; full-page images after every
checkpoint start), synchronous_commit = off (commits do not wait for WAL
flushes), autovacuum off (the loop is the only VACUUM).

Variants (BENCH_CLEANUP_VARIANTS) are named BUILD-IO_METHOD-IO: BUILD
"upstream" runs work/inst-upstream, any other name (default "patched")
work/inst-release with the BENCH_SETTINGS of BUILD and of the full variant
name; IO_METHOD worker, io_uring or sync (io_method); IO buffered or direct
(debug_io_direct = 'data': every write waits for the device).  Default: both
builds x worker, io_uring x buffered, direct = 8 variants.  BUILD
"prev:NAME" runs BUILD NAME on the previous build of the series in
BENCH_PREV_INSTALL (README.md), e.g. prev:patched-worker-buffered, compared
with the same upstream as patched-worker-buffered.  Each variant has
its own cluster (ports BENCH_PORT + 40, + 41, ...: io_method and
debug_io_direct are postmaster settings), with identical settings apart from
those; only one server runs at a time.  io_uring variants whose server does
not start (a kernel or container without io_uring) are skipped with a
message, in the output and in the table's header.

Runs are interleaved: for run k, every variant once, the list rotated by
k - 1 (run 1 in the listed order, run 2 from the second variant, ...).  A
run: start the server, pgbench -i (identical data for every run and
variant), pg_prewarm, CHECKPOINT, then the VACUUM loop and the workload,
unmeasured (warm-up), until the next timed checkpoint starts (~30 s; the
loop's first VACUUMs, which find every page changed since the load, fall
into it), then BENCH_CLEANUP_SECONDS measured seconds of pgbench, the loop
going on, and the sampler; then the checkpoints (pg_stat_checkpointer
num_done; buffers and write-phase seconds from the log), pg_stat_io (reset
at the start of the period), stop the server.  Only VACUUMs that started
and finished within the period count; the one still running at its end is
waited for (its excess is vac_tail_ms in the CSV) and, if it has not
finished BENCH_CLEANUP_STUCK (120) s later (a wake-up lost?), it is
cancelled, the run is flagged (vac_stuck = 1, "!" in the table) and the
script exits with status 1 after the table.

Output: work/bench/cleanup-<date>.csv (one row per run) and
work/bench/cleanup-<date>.txt, the table (also printed): medians per variant
over the runs of tps, BufferPin wait (ms, sampled; all and accounts),
number of pgbench_accounts VACUUMs and their median and max time (ms), the
max time of the small tables' VACUUMs, checkpoints completed, checkpoint
write-phase seconds, buffers written by others than the checkpointer, and
the share of the CPU taken by other load (a noisy run); then, for each
variant that is not upstream, the ratios to upstream with the same io_method
and I/O mode (ratio of the medians) of tps, BufferPin wait (all, accounts)
and VACUUM median and max, and the per-run ratios of BufferPin wait and
VACUUM max (run k of the variant / run k of its upstream), and the
pgbench_accounts VACUUM's time per wait event (top six, mean of the runs;
vac_waits in the CSV).  Cluster data and server logs are under
work/bench/cleanup/, with every VACUUM of each run (warm-up included:
table, start and end in seconds from the start of the measured period, ms)
in vacuums-<variant>-run<k>.csv.

`make bench` runs this after bench_immediate.py, bench_append.py and
bench_flush.py; BENCH_SCENARIOS selects: "cleanup" runs only this one, a
list without "cleanup" skips it, as does BENCH_CLEANUP_RUNS=0.  Environment
(defaults in brackets; BENCH_SCENARIOS, BENCH_SETTINGS and BENCH_PORT are
described in README.md):
  BENCH_CLEANUP_RUNS [3]          runs per variant
  BENCH_CLEANUP_SECONDS [60]      measured seconds per run
  BENCH_CLEANUP_CLIENTS [4]       pgbench -c (-j: min(clients, cores))
  BENCH_CLEANUP_SCALE [20]        pgbench scale
  BENCH_CLEANUP_SHARED_BUFFERS [512MB]
  BENCH_CLEANUP_TIMEOUT [30s]     checkpoint_timeout
  BENCH_CLEANUP_SAMPLE_MS [5]     pg_stat_activity sampling interval
  BENCH_CLEANUP_STUCK [120]       seconds a VACUUM may run past the period
  BENCH_CLEANUP_VARIANTS ["upstream-worker-buffered patched-worker-buffered
      upstream-io_uring-buffered patched-io_uring-buffered
      upstream-worker-direct patched-worker-direct
      upstream-io_uring-direct patched-io_uring-direct"]
BENCH_SETTINGS applies per BUILD and per variant, e.g.
"patched:checkpoint_io_concurrency=4" (the variant's win).
One run takes BENCH_CLEANUP_SECONDS + ~40 s (load, CHECKPOINT, the wait for
the timed checkpoint, shutdown); the defaults (8 variants x 3 runs) about
40 minutes, and the clusters keep ~1.1 GB each (data and recycled WAL).
With --table FILE.csv (and WORK set): print the table again from that CSV.
"""

import os
import re
import subprocess
import sys
import threading
import time

import benchlib
from benchlib import fmt, ratio, round_or_none

OUT = benchlib.bench_dir("cleanup")
(RUNS, SECONDS, CLIENTS, SCALE, SHARED_BUFFERS, TIMEOUT, SAMPLE_MS, STUCK,
 VARIANTS) = benchlib.settings(
    "BENCH_CLEANUP", RUNS=3, SECONDS=60, CLIENTS=4, SCALE=20, SHARED_BUFFERS="512MB",
    TIMEOUT="30s", SAMPLE_MS=5.0, STUCK=120,
    VARIANTS=("upstream-worker-buffered patched-worker-buffered "
              "upstream-io_uring-buffered patched-io_uring-buffered "
              "upstream-worker-direct patched-worker-direct "
              "upstream-io_uring-direct patched-io_uring-direct").split())
JOBS = benchlib.pgbench_jobs(CLIENTS)
IO_METHODS = ("worker", "io_uring", "sync")
IO_MODES = ("buffered", "direct")
ACCOUNTS = "pgbench_accounts"
SMALL = ("pgbench_branches", "pgbench_tellers")
VACUUM = "VACUUM (FREEZE, INDEX_CLEANUP ON) {}"
# a sample: sessions waiting on BufferPin, those of them that are the
# pgbench_accounts VACUUM, and what that VACUUM does ("CPU": active without a
# wait event; "-": not running)
ACC = "query LIKE 'VACUUM%pgbench_accounts%'"
SAMPLE = ("SELECT count(*) FILTER (WHERE wait_event = 'BufferPin'), "
          f"count(*) FILTER (WHERE wait_event = 'BufferPin' AND {ACC}), "
          "coalesce(max(coalesce(wait_event_type || ':' || wait_event, 'CPU')) "
          f"FILTER (WHERE application_name = 'bench_cleanup_vacuum' AND state = 'active' "
          f"AND {ACC}), '-') FROM pg_stat_activity;\n")
MARK = "__bench_cleanup_done__"
FIELDS = ["run", "variant", "build", "io_method", "io", "position", "tps", "lat_ms",
          "transactions", "period_s", "pin_ms", "pin_accounts_ms", "pin_samples",
          "sample_interval_ms", "vacuums", "vac_med_ms", "vac_max_ms", "small_vacuums",
          "small_vac_med_ms", "small_vac_max_ms", "vac_tail_ms", "vac_stuck", "vac_waits",
          "checkpoints", "ckpt_buffers", "ckpt_write_s", "other_writes", "cpu_share",
          "other_cpu_share"]


def parse_variant(v):
    """BUILD-IO_METHOD-IO -> dict(build, io_method, io); exits on a bad name."""
    parts = v.rsplit("-", 2)
    if len(parts) != 3 or not parts[0] or parts[1] not in IO_METHODS or parts[2] not in IO_MODES:
        sys.exit(f"BENCH_CLEANUP_VARIANTS: '{v}' is not BUILD-IO_METHOD-IO with IO_METHOD one "
                 f"of {' '.join(IO_METHODS)} and IO one of {' '.join(IO_MODES)}")
    return dict(build=parts[0], io_method=parts[1], io=parts[2])


def base_of(v):
    """The upstream variant that 'v' (a variant of the series) compares with:
    same io_method and I/O mode; None for an upstream variant."""
    s = parse_variant(v)
    return None if s["build"] == "upstream" else f"upstream-{s['io_method']}-{s['io']}"


class Cluster(benchlib.Cluster):
    def __init__(self, v, port, outdir):
        self.spec = parse_variant(v)
        super().__init__(v, port, outdir, benchlib.install_prefix(self.spec["build"]))

    def init(self):
        extra = (benchlib.io_conf(self.spec["io"]) +
                 benchlib.settings_conf(self.spec["build"], self.name))
        super().init(f"""shared_buffers = {SHARED_BUFFERS}
io_method = {self.spec['io_method']}
max_wal_size = 4GB
checkpoint_timeout = {TIMEOUT}
checkpoint_completion_target = 0.9
synchronous_commit = off
autovacuum = off
{benchlib.LOG_SETTINGS}{extra}""")

    def try_start(self):
        """Start and stop the server once; None if it started, else the end
        of its log (e.g. io_uring not permitted here)."""
        offset = os.path.getsize(self.log) if os.path.exists(self.log) else 0
        try:
            self.pg_ctl("start")
        except subprocess.CalledProcessError:
            self.stop_if_running()
            return "\n".join(benchlib.log_lines(self.log, offset)[-5:])
        self.pg_ctl("stop")
        return None


def end_session(p):
    """Close a session's stdin and reap it (killed if it does not end)."""
    try:
        p.stdin.close()
    except OSError:
        pass
    benchlib.reap(p, 10)


class PinSampler:
    """A psql session polling pg_stat_activity every SAMPLE_MS ms for sessions
    waiting on BufferPin until stop(); sums waiting sessions x time since the
    previous sample (ms), in all and for the pgbench_accounts VACUUMs, and
    the time (ms) of that VACUUM per wait event (waits)."""

    def __init__(self, c, errfile):
        self.p = c.session("-v", "ON_ERROR_STOP=1", appname="bench_cleanup_sampler",
                           stderr=errfile)
        self.pin_ms = self.accounts_ms = 0.0
        self.waits = {}
        self.samples, self.error = 0, None
        self.stop_ev = threading.Event()
        self.t0 = time.monotonic()
        self.th = threading.Thread(target=self.loop)
        self.th.start()

    def loop(self):
        interval = SAMPLE_MS / 1000
        prev = nxt = self.t0
        while not self.stop_ev.is_set():
            try:
                self.p.stdin.write(SAMPLE)
                self.p.stdin.flush()
                line = self.p.stdout.readline()
            except OSError as e:
                self.error = str(e)
                return
            if not line:
                self.error = "the sampling psql ended"
                return
            now = time.monotonic()
            total, accounts, what = line.rstrip("\n").split("|")
            dt = (now - prev) * 1000
            self.pin_ms += int(total) * dt
            self.accounts_ms += int(accounts) * dt
            if what != "-":
                self.waits[what] = self.waits.get(what, 0.0) + dt
            self.samples += 1
            prev = now
            nxt += interval
            if nxt < now:       # behind (a busy machine): no burst to catch up
                nxt = now
            time.sleep(max(0.0, nxt - time.monotonic()))
        self.t1 = prev

    def stop(self):
        self.stop_ev.set()
        self.th.join()
        end_session(self.p)
        if self.error:
            sys.exit(f"BufferPin sampler failed: {self.error}")
        return self.pin_ms, self.accounts_ms, self.samples, self.waits


class VacuumLoop:
    """A psql session running VACUUM (FREEZE, INDEX_CLEANUP ON) on
    pgbench_accounts, _branches and _tellers, over and over, until stop();
    done = [(table, start epoch, end epoch, ms)] with psql's \\timing."""

    def __init__(self, c, errfile):
        self.c = c
        self.p = c.session("-v", "ON_ERROR_STOP=1", appname="bench_cleanup_vacuum",
                           stderr=errfile)
        self.p.stdin.write("SELECT pg_backend_pid();\n\\timing on\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        if not line.strip().isdigit():
            sys.exit(f"VACUUM session on {c.name} failed to start (see {OUT}/psql-errors.log)")
        self.pid = int(line)
        self.done, self.current, self.error, self.cancelled = [], None, None, False
        self.stop_ev = threading.Event()
        self.th = threading.Thread(target=self.loop)
        self.th.start()

    def loop(self):
        while not self.stop_ev.is_set():
            for table in (ACCOUNTS,) + SMALL:
                if self.stop_ev.is_set():
                    return
                self.current = (table, time.time())
                ms = None
                try:
                    self.p.stdin.write(VACUUM.format(table) + ";\n\\echo " + MARK + "\n")
                    self.p.stdin.flush()
                    while True:
                        line = self.p.stdout.readline()
                        if not line or line.strip() == MARK:
                            break
                        m = re.match(r"Time: ([\d.]+) ms", line)
                        if m:
                            ms = float(m.group(1))
                except OSError as e:
                    line = ""
                    self.error = str(e)
                if not line:
                    if not self.cancelled and not self.error:
                        self.error = "the VACUUM psql ended"
                    return
                self.done.append((table, self.current[1], time.time(), ms))
                self.current = None

    def stop(self, t1):
        """Stop after the running VACUUM; cancel it if it runs STUCK s past
        t1 (epoch).  Returns whether it was cancelled."""
        self.stop_ev.set()
        self.th.join(max(0.0, t1 + STUCK - time.time()))
        if self.th.is_alive():
            self.cancelled = True
            print(f"  !! {self.current[0] if self.current else 'VACUUM'} still running "
                  f"{STUCK} s after the measured period: cancelled (pid {self.pid})", flush=True)
            self.c.psql(f"SELECT pg_cancel_backend({self.pid})")
            self.th.join()
        end_session(self.p)
        if self.error:
            sys.exit(f"VACUUM loop failed: {self.error} (see {OUT}/psql-errors.log)")
        return self.cancelled


def wait_timed_checkpoint(c, offset, pgb, limit):
    """Wait until the log shows a timed checkpoint starting after byte
    'offset'; exits if none within 'limit' seconds or if 'pgb' ended."""
    t_end = time.monotonic() + limit
    while time.monotonic() < t_end:
        for line in benchlib.log_lines(c.log, offset):
            m = benchlib.START.match(line)
            if m and "time" in m.group(2).split():
                return
        if pgb.poll() is not None:
            sys.exit(f"warm-up pgbench on {c.name} ended early: {pgb.stderr.read()[-2000:]}")
        time.sleep(0.05)
    sys.exit(f"no timed checkpoint started within {limit} s on {c.name} (log {c.log})")


def timeout_seconds():
    m = re.fullmatch(r"(\d+)\s*(s|min)?", TIMEOUT.strip())
    if not m:
        sys.exit(f"BENCH_CLEANUP_TIMEOUT: seconds (30s) or minutes (1min), not {TIMEOUT}")
    return int(m.group(1)) * (60 if m.group(2) == "min" else 1)


def vac_stats(done, tables, t0, t1):
    """Number, median and max time (ms) of the VACUUMs of 'tables' that
    started at t0 or later and finished by t1 (epoch)."""
    ms = [d[3] for d in done
          if d[0] in tables and d[1] >= t0 and d[2] <= t1 and d[3] is not None]
    return (len(ms), round_or_none(benchlib.median_of(ms), 1),
            round_or_none(max(ms), 1) if ms else None)


def one_run(c, rep, position):
    c.pg_ctl("start")
    errlog = open(os.path.join(OUT, "psql-errors.log"), "a")
    try:
        c.pgbench("-i", "-q", "-s", str(SCALE))
        c.prewarm(*benchlib.PGBENCH_RELATIONS, "pgbench_history")
        c.psql("CHECKPOINT")
        common = benchlib.pgbench_args(CLIENTS, JOBS)
        sampler = vac = None
        try:
            # the VACUUM loop runs through the warm-up too: the VACUUMs of
            # the measured period each find only what changed since the
            # previous one, as in a steady state
            vac = VacuumLoop(c, errlog)
            # warm-up until the next timed checkpoint starts, so that the
            # measured period starts with a spread checkpoint
            offset = os.path.getsize(c.log)
            limit = timeout_seconds() + 30
            warm = subprocess.Popen([c.bin("pgbench")] + common + ["-T", str(limit + 30)],
                                    env=c.env(), stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE, text=True)
            try:
                wait_timed_checkpoint(c, offset, warm, limit)
            finally:
                warm.terminate()
                warm.wait()
                warm.stderr.close()
            c.psql("SELECT pg_stat_reset_shared('io')")
            done0 = c.checkpoints_done()
            cpu = benchlib.CpuShares(c)
            sampler = PinSampler(c, errlog)
            t0 = time.time()
            out = c.pgbench(*common, "-T", str(SECONDS)).stdout
            t1 = time.time()
            pin_ms, pin_accounts_ms, samples, waits = sampler.stop()
            done1 = c.checkpoints_done()
            cpu_share, other_cpu_share = cpu.shares(time.time() - t0)
            stuck = vac.stop(t1)
            tail_s = time.time() - t1
        except BaseException:
            # end the sessions without waiting for their results
            for s in (sampler, vac):
                if s is not None and s.th.is_alive():
                    s.stop_ev.set()
                    s.p.kill()
            raise
        time.sleep(1.5)     # backends' I/O statistics reach pg_stat_io within a second
        other = c.other_writes()
    finally:
        c.pg_ctl("stop")
        errlog.close()
    ckpts = benchlib.checkpoints(c.log, offset, t0, t1)
    # every VACUUM of the run, the warm-up's included, for a closer look
    benchlib.write_csv(os.path.join(OUT, f"vacuums-{benchlib.file_name(c.name)}-run{rep}.csv"),
                       ["table", "start_s", "end_s", "ms", "in_period"],
                       [dict(table=table, start_s=round(start - t0, 3), end_s=round(end - t0, 3),
                             ms=ms, in_period=int(start >= t0 and end <= t1))
                        for table, start, end, ms in vac.done])
    n, med, mx = vac_stats(vac.done, (ACCOUNTS,), t0, t1)
    sn, smed, smx = vac_stats(vac.done, SMALL, t0, t1)
    row = dict(run=rep, variant=c.name, **c.spec, position=position,
               **benchlib.pgbench_summary(out), period_s=round(t1 - t0, 1),
               pin_ms=round(pin_ms, 1), pin_accounts_ms=round(pin_accounts_ms, 1),
               pin_samples=samples,
               sample_interval_ms=round((t1 - t0) * 1000 / samples, 2) if samples else None,
               vacuums=n, vac_med_ms=med, vac_max_ms=mx, small_vacuums=sn,
               small_vac_med_ms=smed, small_vac_max_ms=smx, vac_tail_ms=round(tail_s * 1000),
               vac_stuck=int(stuck),
               vac_waits=";".join(f"{k}={v:.0f}" for k, v in
                                  sorted(waits.items(), key=lambda kv: -kv[1])),
               checkpoints=done1 - done0,
               ckpt_buffers=sum(k["buffers"] for k in ckpts if k["complete"] and k["end"] <= t1),
               ckpt_write_s=benchlib.write_phase_seconds(ckpts, t0, t1),
               other_writes=other, cpu_share=cpu_share, other_cpu_share=other_cpu_share)
    benchlib.print_run(row)
    return row


SKIPPED = []     # the variants that startable() left out


def startable(clusters):
    """The clusters but the io_uring ones whose server does not start (a
    kernel or container without io_uring): those are said and added to
    SKIPPED."""
    for c in clusters:
        if c.spec["io_method"] == "io_uring":
            err = c.try_start()
            if err is not None:
                print(f"{c.name}: the server does not start with io_method = io_uring, "
                      f"skipped; its log ends:\n{err}", flush=True)
                SKIPPED.append(c.name)
    return [c for c in clusters if c.name not in SKIPPED]


def table(rows, header):
    """Medians per variant; ratios to the upstream variant with the same
    io_method and I/O mode."""
    variants = benchlib.variants_of(rows)
    cols = [("tps", "tps", 0), ("pin_ms", "pin ms", 0), ("pin_accounts_ms", "pin acc", 0),
            ("vacuums", "vacs", 0), ("vac_med_ms", "vac med", 1), ("vac_max_ms", "vac max", 1),
            ("small_vac_max_ms", "sm max", 1), ("checkpoints", "ckpts", 0),
            ("ckpt_write_s", "ckpt s", 0), ("other_writes", "oth.wr", 0),
            ("other_cpu_share", "oth.cpu", 2)]
    xcols = [("tps", "x tps"), ("pin_ms", "x pin"), ("pin_accounts_ms", "x pin acc"),
             ("vac_med_ms", "x vac med"), ("vac_max_ms", "x vac max")]
    med = benchlib.medians(rows, variants, [k for k, _, _ in cols])
    stuck = {v for v in variants for r in rows if r["variant"] == v and r["vac_stuck"]}
    w = max(len(v) for v in variants) + 1
    lines = [header, ""] + benchlib.ruled(f"{'variant':{w}} " + benchlib.col_heads(cols, 7) +
                                          " " + " ".join(f"{h:>9}" for _, h in xcols))
    for v in variants:
        b = med.get(base_of(v))
        lines.append(f"{v + ('!' if v in stuck else ''):{w}} " +
                     benchlib.col_cells(med[v], cols, 7) + " " +
                     " ".join(f"{fmt(ratio(med[v][k], b[k]) if b else None):>9}"
                              for k, _ in xcols))
    lines.append("")
    for v in variants:
        b = base_of(v)
        if b in med:
            lines.append(f"{v} / {b} per run: pin ms " +
                         benchlib.fmt_all(benchlib.paired_ratios(rows, v, "pin_ms", base=b)) +
                         "; vac max " +
                         benchlib.fmt_all(benchlib.paired_ratios(rows, v, "vac_max_ms", base=b)))
    lines.append("pgbench_accounts VACUUM, sampled time per wait event (ms per run, mean; CPU: "
                 "active without a wait event):")
    for v in variants:
        vr = [r for r in rows if r["variant"] == v]
        tot = {}
        for r in vr:
            for item in (r["vac_waits"] or "").split(";"):
                if "=" in item:
                    k, ms = item.rsplit("=", 1)
                    tot[k] = tot.get(k, 0.0) + float(ms) / len(vr)
        top = sorted(tot.items(), key=lambda kv: -kv[1])[:6]
        lines.append(f"  {v:{w}} " + ", ".join(f"{k} {ms:.0f}" for k, ms in top))
    lines.append(f"medians of {len({r['run'] for r in rows})} runs.  pin ms: time sessions "
                 f"waited on BufferPin (sampled every {SAMPLE_MS:g} ms: waiting sessions x "
                 f"time between samples), pin acc: of the pgbench_accounts VACUUMs; vacs, vac "
                 f"med, vac max: VACUUM (FREEZE, INDEX_CLEANUP ON) pgbench_accounts started "
                 f"and finished in the measured period, number, median and max ms; sm max: "
                 f"max ms of those of pgbench_branches and _tellers; ckpts: checkpoints "
                 f"completed in the period (pg_stat_checkpointer num_done), ckpt s: seconds "
                 f"of it in checkpoint write "
                 f"phases; oth.wr: buffers written by backends and the bgwriter (~0: the "
                 f"checkpointer writes); oth.cpu: share of the machine's CPU taken by other "
                 f"load (a noisy run); x: variant median / median of upstream with the same "
                 f"io_method and I/O mode; per run: run k / run k of that upstream; "
                 f"! = a VACUUM still running {STUCK} s after the period, cancelled")
    return "\n".join(lines)


def main():
    if not benchlib.main_start(table, VARIANTS, "BENCH_CLEANUP_VARIANTS",
                               ("cleanup", "cleanup-lock waits", RUNS, "BENCH_CLEANUP_RUNS")):
        return
    for v in VARIANTS:
        parse_variant(v)
    timeout_seconds()
    csv_path = benchlib.stamped_csv("cleanup")
    header = (f"cleanup-lock waits: TPC-B-like pgbench -M prepared -c {CLIENTS} -j {JOBS}, "
              f"scale {SCALE}, shared_buffers {SHARED_BUFFERS} (prewarmed), + a VACUUM (FREEZE, "
              f"INDEX_CLEANUP ON) loop over pgbench_accounts, _branches, _tellers; {SECONDS} s "
              f"per run from the start of a timed checkpoint, checkpoint_timeout {TIMEOUT}, "
              f"checkpoint_completion_target 0.9, max_wal_size 4GB, synchronous_commit off; "
              f"{RUNS} runs interleaved (rotated); machine: {benchlib.machine()}")
    clusters = [Cluster(v, benchlib.port("cleanup", i), OUT) for i, v in enumerate(VARIANTS)]

    def table_noting_skipped(rows, header):
        if SKIPPED:
            header += f"\nskipped (io_method = io_uring does not start here): {' '.join(SKIPPED)}"
        return table(rows, header)
    rows = benchlib.run_and_report(header, clusters, RUNS, one_run, csv_path, FIELDS,
                                   table_noting_skipped, order=benchlib.rotated,
                                   usable=startable)
    stuck = [r for r in rows if r["vac_stuck"]]
    if stuck:
        sys.exit(f"ERROR: {len(stuck)} run(s) with a VACUUM still running {STUCK} s after the "
                 f"measured period (cancelled; vac_stuck = 1 in {csv_path}): " +
                 ", ".join(f"{r['variant']} run {r['run']}" for r in stuck))


if __name__ == "__main__":
    main()
