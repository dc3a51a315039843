#!/usr/bin/python3
"""pgbench beside application DDL: what patch 0001 ("Close I/O workers'
files of relations whose files were unlinked") costs, unpatched PostgreSQL
vs the patch series, io_method = worker.

Question: the series counts every unlink of a permanent relation's file in
shared memory, and an I/O worker that sees the count move (before it
reopens a file for an I/O, and before it sleeps) closes all its files and
destroys its SMgrRelations (smgrreleaseunlinked()); the next I/Os reopen
them.  Applications drop and truncate tables all the time: what does that
cost in throughput and latency, and how often do the workers reopen files?

Workload: pgbench TPC-B-like (-M prepared, BENCH_DDL_CLIENTS clients) at
scale BENCH_DDL_SCALE (10: ~150 MB of tables and indexes) with
shared_buffers BENCH_DDL_SHARED_BUFFERS (128MB, PostgreSQL's default): the
data is a bit larger than shared_buffers, so that buffers are evicted and
read back all the time, and under the series the I/O workers execute the
writes of the checkpointer, the bgwriter and the backends (in 18.6 they
execute only reads issued through read streams; pgbench's single-block
reads run in the backend): the worst case for closing all their files.
Beside it, in a "ddl" variant, two psql sessions run the DDL loops of
applications:
  queue:   INSERT 10 rows into a queue table (bigserial primary key, text,
           timestamptz: heap, TOAST table and index, primary key), then
           TRUNCATE it; every BENCH_DDL_QUEUE_MS (100) ms
  staging: CREATE TABLE (int, text, timestamptz), INSERT
           BENCH_DDL_STAGING_ROWS (5000) rows, DROP TABLE; every
           BENCH_DDL_STAGING_MS (1000) ms ("a staging table a minute",
           accelerated)
each statement its own transaction; a loop that falls behind starts its
next iteration at once, without catching up.  A "control" variant runs
pgbench alone (the baseline ratio of the builds).
Settings: the defaults (io_method = worker, io_workers = 3, autovacuum on,
max_wal_size 1GB, ...) except synchronous_commit = off (the run is
CPU-bound, not bound by WAL flushes at commit, so that extra work of the
series shows in tps) and checkpoint_timeout BENCH_DDL_TIMEOUT (60s: each
measured period holds two timed checkpoints, whose writes and fsyncs open
files; with the default 5min it would hold none), log_checkpoints and a
log_line_prefix; data checksums on.

File opens: as root, the script counts the openat() calls (and close(),
and the read and write calls preadv, pwritev, pread64, pwrite64: I/Os) of
the I/O workers, the checkpointer and the background writer during the
measured period, with `perf stat --per-thread` on the tracepoints
syscalls:sys_enter_* of those processes: counted in the kernel, without
stopping them (strace cannot use seccomp-bpf for processes it attaches to
with -p, so it would stop the workers at every one of their I/O calls).
The benchmark itself runs as the build user (a child process); the root
process runs perf for it, on request, for the server's processes only.
Not as root, or without perf (Debian: linux-perf), those columns are
empty.

Variants (BENCH_DDL_VARIANTS) are named BUILD-LOAD: BUILD "upstream" runs
work/inst-upstream, any other name (default "patched") work/inst-release
with the BENCH_SETTINGS of BUILD and of the full variant name, "prev:NAME"
NAME on BENCH_PREV_INSTALL (README.md); LOAD "ddl" (pgbench and the DDL
loops) or "control" (pgbench alone).  Each variant has its own cluster
(ports BENCH_PORT + 80, + 81, ...); only one server runs at a time.  Runs
are interleaved: run k runs every variant, in the listed order on odd runs,
reversed on even runs (upstream-ddl patched-ddl upstream-control
patched-control, then patched-control upstream-control patched-ddl
upstream-ddl): the builds with the same load always run one after the
other.  A run: start the server, pgbench -i (identical data every run),
(re)create the queue table, CHECKPOINT; start the DDL loops ("ddl"),
BENCH_DDL_WARMUP (30) s of pgbench unmeasured, then BENCH_DDL_SECONDS
(120) s measured (pgbench -P 1 -l; openat counted; DDL iterations that
ended in the period counted); stop the loops and the server.

Output: work/bench/ddl-<date>.csv (one row per run) and
work/bench/ddl-<date>.txt, the table (also printed): medians per variant
of tps (pgbench's), the median of its per-second tps (-P 1), p99 latency
(ms, of every transaction: pgbench -l), DDL iterations of each loop and
their median time (ms), openat() calls of the I/O workers (all of them),
the checkpointer and the bgwriter, the workers' openat per DDL iteration
and their I/O calls, checkpoints completed in the period, the share of
the CPU taken by other load and the 1-minute load average when the run
started; then the ratios of each build to upstream with the same load,
within each run (run k / run k), and the series' cost under DDL: its tps
(and p99) ratio under "ddl" over its ratio under "control".  Cluster data,
server logs and the loops' errors (psql-errors.log) are under
work/bench/ddl/.

`make bench-ddl` runs this (as root: scripts/bench/bench.sh runs it as root,
after building both servers as the build user).  Environment (defaults in
brackets; BENCH_SETTINGS, BENCH_PORT, BENCH_BUILD, BENCH_PREV_INSTALL are
described in README.md):
  BENCH_DDL_RUNS [3]              runs per variant
  BENCH_DDL_SECONDS [120]         measured seconds per run
  BENCH_DDL_WARMUP [30]           unmeasured seconds first (the loops run)
  BENCH_DDL_CLIENTS [4]           pgbench -c (-j: min(clients, cores))
  BENCH_DDL_SCALE [10]            pgbench scale
  BENCH_DDL_SHARED_BUFFERS [128MB]
  BENCH_DDL_TIMEOUT [60s]         checkpoint_timeout
  BENCH_DDL_QUEUE_MS [100]        period of the queue loop (INSERT, TRUNCATE)
  BENCH_DDL_STAGING_MS [1000]     period of the staging loop (CREATE, INSERT, DROP)
  BENCH_DDL_STAGING_ROWS [5000]   rows per staging table
  BENCH_DDL_VARIANTS ["upstream-ddl patched-ddl upstream-control patched-control"]
One run takes BENCH_DDL_SECONDS + BENCH_DDL_WARMUP + ~25 s; the defaults
(4 variants x 3 runs) about 35 minutes.
With --table FILE.csv (and WORK set): print the table again from that CSV.
"""

import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import benchlib
from benchlib import fmt, ratio, round_or_none

OUT = benchlib.bench_dir("ddl")
(RUNS, SECONDS, WARMUP, CLIENTS, SCALE, SHARED_BUFFERS, TIMEOUT, QUEUE_MS, STAGING_MS,
 STAGING_ROWS, VARIANTS) = benchlib.settings(
    "BENCH_DDL", RUNS=3, SECONDS=120, WARMUP=30, CLIENTS=4, SCALE=10, SHARED_BUFFERS="128MB",
    TIMEOUT="60s", QUEUE_MS=100, STAGING_MS=1000, STAGING_ROWS=5000,
    VARIANTS=["upstream-ddl", "patched-ddl", "upstream-control", "patched-control"])
JOBS = benchlib.pgbench_jobs(CLIENTS)
LOADS = ("ddl", "control")
BUILDER = os.environ.get("PG_BUILDER", "pgbuild")

QUEUE_TABLE = ("CREATE TABLE ddl_queue (id bigserial PRIMARY KEY, payload text NOT NULL, "
               "created_at timestamptz NOT NULL DEFAULT now())")
LOOPS = {
    "queue": (QUEUE_MS, "INSERT INTO ddl_queue (payload) SELECT 'job ' || g "
                        "FROM generate_series(1, 10) g;\nTRUNCATE ddl_queue;\n"),
    "staging": (STAGING_MS, "CREATE TABLE ddl_staging (id int, payload text, "
                            "loaded_at timestamptz DEFAULT now());\n"
                            "INSERT INTO ddl_staging (id, payload) SELECT g, md5(g::text) "
                            f"FROM generate_series(1, {STAGING_ROWS}) g;\n"
                            "DROP TABLE ddl_staging;\n"),
}
MARK = "__bench_ddl_done__"
ERRMARK = "__bench_ddl_error__"


def with_error_checks(sql):
    """psql input: each statement of 'sql' followed by an \\echo of ERRMARK
    if it failed."""
    return "".join(st + ";\n\\if :ERROR\n\\echo " + ERRMARK + "\n\\endif\n"
                   for st in sql.split(";\n") if st.strip())

# the server processes whose system calls are counted: process title -> column prefix
KINDS = {"io worker": "iow", "checkpointer": "ckpt", "background writer": "bgw"}
# tracepoints counted, by column suffix
EVENTS = {"openat": ["openat"], "close": ["close"],
          "io": ["preadv", "pwritev", "pread64", "pwrite64"]}
FIELDS = (["run", "variant", "build", "load", "position", "tps", "lat_ms", "transactions",
           "tps_sec_med", "tps_sec_min", "p99_ms", "p999_ms", "max_ms", "period_s"] +
          [f"{lp}_{k}" for lp in LOOPS for k in ("iters", "ms_med", "ms_max", "errors")] +
          [f"{p}_{e}" for p in KINDS.values() for e in EVENTS] +
          ["iow_procs", "checkpoints", "cpu_share", "other_cpu_share", "load1"])


def parse_variant(v):
    """BUILD-LOAD -> dict(build, load); exits on a bad name."""
    build, _, load = v.rpartition("-")
    if not build or load not in LOADS:
        sys.exit(f"BENCH_DDL_VARIANTS: '{v}' is not BUILD-LOAD with LOAD one of "
                 f"{' '.join(LOADS)}")
    return dict(build=build, load=load)


def base_of(v, load=None):
    """The upstream variant with the load of 'v' (or 'load'); None for an
    upstream variant itself."""
    s = parse_variant(v)
    return None if s["build"] == "upstream" else f"upstream-{load or s['load']}"


# ------------------------------------------------------------- counting system calls (root)

def perf_events():
    return ",".join(f"syscalls:sys_enter_{n}" for names in EVENTS.values() for n in names)


def perf_usable():
    """None if perf counts the tracepoints here (root, perf installed), else why not."""
    if not shutil.which("perf"):
        return "perf is not installed (Debian: apt-get install linux-perf)"
    r = subprocess.run(["perf", "stat", "-x,", "-e", perf_events(), "--", "true"],
                       capture_output=True, text=True)
    if r.returncode or "sys_enter_openat" not in r.stderr:
        return f"perf stat on the syscall tracepoints failed: {r.stderr.strip()[-300:]}"
    return None


def owner_uid(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Uid:"):
                return int(line.split()[1])
    return None


class PerfAgent:
    """Root side: serves the benchmark's requests on a pipe, "start PID,PID,..."
    (perf stat --per-thread on EVENTS for those processes, which must be
    the build user's; answers "ok" once counting) and "stop" (answers
    "counts PID=EVENT:N/EVENT:N... ..."), until the benchmark closes it."""

    def __init__(self, req_fd, ans_fd, uid):
        self.req = os.fdopen(req_fd, "r")
        self.ans = os.fdopen(ans_fd, "w", buffering=1)
        self.uid, self.perf = uid, None
        self.out = os.path.join(tempfile.mkdtemp(prefix="bench_ddl_perf."), "perf-stat.out")
        self.th = threading.Thread(target=self.loop, daemon=True)
        self.th.start()

    def loop(self):
        for line in self.req:
            cmd, _, arg = line.strip().partition(" ")
            try:
                self.ans.write((self.start(arg) if cmd == "start" else self.stop()) + "\n")
            except (OSError, ValueError, subprocess.SubprocessError) as e:
                self.kill()
                self.ans.write(f"error: {line.strip()}: {e}\n")
        self.kill()

    def start(self, arg):
        self.kill()
        pids = [int(p) for p in arg.split(",")]
        for p in pids:
            if owner_uid(p) != self.uid:
                raise ValueError(f"process {p} is not {BUILDER}'s")
        ctl_r, ctl_w = os.pipe()
        ack_r, ack_w = os.pipe()
        # started disabled (-D -1), enabled and disabled through --control:
        # the counts cover exactly the period between the requests
        self.perf = subprocess.Popen(
            ["perf", "stat", "-x,", "--per-thread", "-e", perf_events(), "-D", "-1",
             "--control", f"fd:{ctl_r},{ack_w}", "-o", self.out, "-p", ",".join(map(str, pids))],
            pass_fds=(ctl_r, ack_w), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True)
        os.close(ctl_r)
        os.close(ack_w)
        self.ctl, self.ack = ctl_w, ack_r
        self.control("enable")
        return "ok"

    def control(self, what):
        os.write(self.ctl, what.encode() + b"\n")
        if not os.read(self.ack, 16).startswith(b"ack"):
            raise OSError(f"perf did not acknowledge '{what}'")

    def stop(self):
        if self.perf is None:
            raise ValueError("not counting")
        self.control("disable")
        self.perf.send_signal(signal.SIGINT)
        self.perf.wait(30)
        err = self.perf.stderr.read()
        self.close_perf()
        counts = {}
        with open(self.out) as f:
            for line in f:
                m = re.match(r"^.*-(\d+),(\d+|<not counted>),[^,]*,syscalls:sys_enter_(\w+),",
                             line)
                if m:
                    n = 0 if m.group(2).startswith("<") else int(m.group(2))
                    counts.setdefault(m.group(1), {})[m.group(3)] = n
        if not counts:
            raise OSError(f"no counts from perf: {err.strip()[-300:]}")
        return "counts " + " ".join(f"{pid}=" + "/".join(f"{e}:{n}" for e, n in ev.items())
                                    for pid, ev in counts.items())

    def close_perf(self):
        for fd in (self.ctl, self.ack):
            try:
                os.close(fd)
            except OSError:
                pass
        self.perf = None

    def kill(self):
        if self.perf is not None:
            benchlib.reap(self.perf, 10, signal.SIGINT)
            self.close_perf()


class Counter:
    """Benchmark side: asks the root process (PerfAgent) to count the system
    calls of processes; without one (not root, no perf), counts nothing."""

    def __init__(self):
        fds = os.environ.get("BENCH_DDL_AGENT")
        self.why_not = os.environ.get("BENCH_DDL_NO_COUNTS", "not root")
        self.req = self.ans = None
        if fds:
            req, ans = (int(x) for x in fds.split(","))
            self.req = os.fdopen(req, "w", buffering=1)
            self.ans = os.fdopen(ans, "r")

    def ask(self, what):
        self.req.write(what + "\n")
        a = self.ans.readline().strip()
        if not a or a.startswith("error"):
            sys.exit(f"counting system calls: {a or 'the root process ended'}")
        return a

    def start(self, pids):
        if self.req:
            self.ask("start " + ",".join(map(str, pids)))

    def stop(self):
        """{pid: {event: count}}, or None when not counting."""
        if not self.req:
            return None
        res = {}
        for item in self.ask("stop").split()[1:]:
            pid, _, evs = item.partition("=")
            res[int(pid)] = {e: int(n) for e, _, n in (x.partition(":") for x in evs.split("/"))}
        return res


# ------------------------------------------------------------------ the benchmark (build user)

class Cluster(benchlib.Cluster):
    def __init__(self, v, port, outdir):
        self.spec = parse_variant(v)
        super().__init__(v, port, outdir, benchlib.install_prefix(self.spec["build"]))

    def init(self):
        super().init(f"""shared_buffers = {SHARED_BUFFERS}
checkpoint_timeout = {TIMEOUT}
synchronous_commit = off
{benchlib.LOG_SETTINGS}{benchlib.settings_conf(self.spec['build'], self.name)}""")

    def aux_pids(self):
        """{pid: KINDS key} of the running server's I/O workers, checkpointer
        and background writer (children of the postmaster, by process title)."""
        with open(os.path.join(self.data, "postmaster.pid")) as f:
            pm = int(f.readline())
        res = {}
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open(f"/proc/{d}/stat") as f:
                    st = f.read()
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    title = f.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if int(st[st.rindex(")") + 2:].split()[1]) != pm:
                continue
            for k in KINDS:
                if title.startswith("postgres: " + k):
                    res[int(d)] = k
        if not any(k == "io worker" for k in res.values()):
            sys.exit(f"no I/O worker found on {self.name} (io_method is not worker?)")
        return res


class DdlLoop:
    """A psql session running 'sql' every 'period_ms' ms until stop(); done =
    [(start epoch, end epoch)] of the iterations that succeeded, errors =
    how many failed (psql goes on: the statement's error is in
    psql-errors.log)."""

    def __init__(self, c, name, period_ms, sql, errfile):
        self.name, self.period, self.sql = name, period_ms / 1000, with_error_checks(sql)
        self.p = c.session(appname=f"bench_ddl_{name}", stderr=errfile)
        self.done, self.errors, self.error = [], 0, None
        self.stop_ev = threading.Event()
        self.th = threading.Thread(target=self.loop)
        self.th.start()

    def loop(self):
        nxt = time.monotonic()
        while not self.stop_ev.is_set():
            t0 = time.time()
            try:
                self.p.stdin.write(self.sql + "\\echo " + MARK + "\n")
                self.p.stdin.flush()
                failed = False
                line = self.p.stdout.readline()
                while line and line.strip() != MARK:
                    failed = failed or line.strip() == ERRMARK
                    line = self.p.stdout.readline()
            except OSError as e:
                self.error = str(e)
                return
            if not line:
                self.error = f"the {self.name} loop's psql ended"
                return
            if not failed:
                self.done.append((t0, time.time()))
            else:
                self.errors += 1
            nxt += self.period
            now = time.monotonic()
            if nxt < now:       # behind: start the next iteration now, no catching up
                nxt = now
            self.stop_ev.wait(nxt - now)

    def stop(self):
        self.stop_ev.set()
        self.th.join()
        try:
            self.p.stdin.close()
        except OSError:
            pass
        benchlib.reap(self.p, 10)
        if self.error:
            sys.exit(f"DDL loop failed: {self.error} (see {OUT}/psql-errors.log)")

    def stats(self, t0, t1):
        """Iterations that ended in [t0, t1]: number, median and max ms."""
        ms = [(e - s) * 1000 for s, e in self.done if t0 <= e <= t1]
        return (len(ms), round_or_none(benchlib.median_of(ms), 1),
                round_or_none(max(ms), 1) if ms else None)


def latency_pcts(logdir):
    """p99, p99.9 and max of the transaction latencies (ms) of the pgbench
    -l logs in 'logdir'."""
    lats = sorted(lat_us / 1000 for _, _, lat_us in benchlib.tx_records(logdir))
    if not lats:
        return None, None, None
    return (round(benchlib.pct(lats, 0.99), 3), round(benchlib.pct(lats, 0.999), 3),
            round(lats[-1], 3))


def one_run(c, rep, position, counter):
    load1 = round(os.getloadavg()[0], 2)
    c.pg_ctl("start")
    errlog = open(os.path.join(OUT, "psql-errors.log"), "a")
    logdir = os.path.join(OUT, f"pgbench-log-{benchlib.file_name(c.name)}")
    shutil.rmtree(logdir, ignore_errors=True)
    os.makedirs(logdir)
    loops = []
    try:
        c.pgbench("-i", "-q", "-s", str(SCALE))
        # the cluster is initialized once: the previous run's tables go
        c.psql("DROP TABLE IF EXISTS ddl_queue, ddl_staging")
        c.psql(QUEUE_TABLE)
        c.psql("CHECKPOINT")
        common = benchlib.pgbench_args(CLIENTS, JOBS)
        try:
            if c.spec["load"] == "ddl":
                loops = [DdlLoop(c, name, ms, sql, errlog) for name, (ms, sql) in LOOPS.items()]
            if WARMUP:
                c.pgbench(*common, "-T", str(WARMUP))
            pids = c.aux_pids()
            offset = os.path.getsize(c.log)
            ck0 = c.checkpoints_done()
            cpu = benchlib.CpuShares(c)
            counter.start(pids)
            t0 = time.time()
            r = c.pgbench(*common, "-T", str(SECONDS), "-P", "1", "-l",
                          "--log-prefix", os.path.join(logdir, "pgbench_log"))
            t1 = time.time()
            counts = counter.stop()
            cpu_share, other_cpu_share = cpu.shares(time.time() - t0)
            checkpoints = c.checkpoints_done() - ck0
        finally:
            for lp in loops:
                lp.stop()
    finally:
        c.pg_ctl("stop")
        errlog.close()
    per_sec = [tps for tps, _ in benchlib.progress(r.stderr).values()]
    p99, p999, mx = latency_pcts(logdir)
    shutil.rmtree(logdir)
    row = dict(run=rep, variant=c.name, **c.spec, position=position,
               **benchlib.pgbench_summary(r.stdout),
               tps_sec_med=round_or_none(benchlib.median_of(per_sec), 1),
               tps_sec_min=min(per_sec) if per_sec else None, p99_ms=p99, p999_ms=p999,
               max_ms=mx, period_s=round(t1 - t0, 1))
    for lp in LOOPS:
        loop = [x for x in loops if x.name == lp]
        n, med, mx = loop[0].stats(t0, t1) if loop else (None, None, None)
        row.update({f"{lp}_iters": n, f"{lp}_ms_med": med, f"{lp}_ms_max": mx,
                    f"{lp}_errors": loop[0].errors if loop else None})
    for k, p in KINDS.items():
        for e, names in EVENTS.items():
            row[f"{p}_{e}"] = None if counts is None else sum(
                counts.get(pid, {}).get(n, 0) for pid, kind in pids.items() if kind == k
                for n in names)
    row.update(iow_procs=sum(1 for k in pids.values() if k == "io worker"),
               checkpoints=checkpoints, cpu_share=cpu_share, other_cpu_share=other_cpu_share,
               load1=load1)
    errs = sum(row[f"{lp}_errors"] or 0 for lp in LOOPS)
    if errs:
        print(f"  !! {errs} DDL iteration(s) failed (see {OUT}/psql-errors.log)", flush=True)
    benchlib.print_run(row)
    return row


def ddl_iters(r):
    n = [r[f"{lp}_iters"] for lp in LOOPS if r[f"{lp}_iters"] is not None]
    return sum(n) if n else None


def ddl_cost(rows, v, ctl, key):
    """Per run k: (v / upstream-ddl) / (ctl / upstream-control) of 'key'."""
    by = {(r["variant"], r["run"]): r[key] for r in rows}
    return [ratio(ratio(by.get((v, k)), by.get(("upstream-ddl", k))),
                  ratio(by.get((ctl, k)), by.get(("upstream-control", k))))
            for k in sorted({r["run"] for r in rows})]


def table(rows, header):
    """Medians per variant; ratios within each run to upstream with the same
    load; the series' cost under DDL."""
    variants = benchlib.variants_of(rows)
    for r in rows:
        r["ddl_iters"] = ddl_iters(r)
        r["iow_open_per_ddl"] = ratio(r["iow_openat"], r["ddl_iters"])
    cols = [("tps", "tps", 0), ("tps_sec_med", "tps/s med", 0), ("p99_ms", "p99 ms", 2),
            ("queue_iters", "queue it", 0), ("queue_ms_med", "queue ms", 1),
            ("staging_iters", "stage it", 0), ("staging_ms_med", "stage ms", 1),
            ("iow_openat", "iow open", 0), ("iow_open_per_ddl", "open/it", 2),
            ("iow_io", "iow I/Os", 0), ("ckpt_openat", "ckpt open", 0),
            ("bgw_openat", "bgw open", 0), ("checkpoints", "ckpts", 0),
            ("other_cpu_share", "oth.cpu", 2), ("load1", "load1", 2)]
    med = benchlib.medians(rows, variants, [k for k, _, _ in cols])
    w = max(len(v) for v in variants) + 1
    lines = [header, ""] + benchlib.ruled(f"{'variant':{w}} " + benchlib.col_heads(cols, 9) +
                                          f" {'x tps':>7} {'x p99':>7}")
    for v in variants:
        b = base_of(v)
        xt = benchlib.median_ratio(rows, v, "tps", base=b) if b in med else None
        xp = benchlib.median_ratio(rows, v, "p99_ms", base=b) if b in med else None
        lines.append(f"{v:{w}} " + benchlib.col_cells(med[v], cols, 9) +
                     f" {fmt(xt):>7} {fmt(xp):>7}")
    lines.append("")
    for v in variants:
        b = base_of(v)
        if b in med:
            for key, what in (("tps", "tps"), ("tps_sec_med", "tps/s med"), ("p99_ms", "p99")):
                lines.append(f"{v} / {b} {what} per run: " + benchlib.per_run_text(
                    benchlib.paired_ratios(rows, v, key, base=b)))
    # the series' cost under DDL: its ratio to upstream with the DDL loops
    # over its ratio without them, run by run
    for v in variants:
        s = parse_variant(v)
        ctl = f"{s['build']}-control"
        if s["load"] == "ddl" and s["build"] != "upstream" and ctl in med and \
                "upstream-ddl" in med and "upstream-control" in med:
            for key, what in (("tps", "tps"), ("p99_ms", "p99")):
                lines.append(f"DDL cost of {s['build']} ({what}): ({v} / upstream-ddl) / "
                             f"({ctl} / upstream-control), per run: " +
                             benchlib.per_run_text(ddl_cost(rows, v, ctl, key)))
    for v in variants:
        tps = [r["tps"] for r in rows if r["variant"] == v and r["tps"]]
        if len(tps) > 1:
            lines.append(f"noise: {v} tps max/min over the runs {max(tps) / min(tps):.3f}")
    lines.append(f"medians of {len({r['run'] for r in rows})} runs.  tps: pgbench's; tps/s med: "
                 f"median of the per-second tps (-P 1); p99 ms: 99th percentile of every "
                 f"transaction's latency (pgbench -l); queue it, stage it: iterations of the "
                 f"queue loop (INSERT 10 rows, TRUNCATE) and of the staging loop (CREATE TABLE, "
                 f"INSERT {STAGING_ROWS} rows, DROP TABLE) that ended in the measured period, "
                 f"queue ms, stage ms: their median time; iow open, ckpt open, bgw open: "
                 f"openat() calls of the I/O workers (all), the checkpointer, the bgwriter in "
                 f"the period (perf stat, syscall tracepoints; '-': not counted); open/it: the "
                 f"workers' openat per DDL iteration (both loops); iow I/Os: their preadv, "
                 f"pwritev, pread64, pwrite64 calls; ckpts: checkpoints completed in the "
                 f"period; oth.cpu: share of the machine's CPU taken by other load; load1: "
                 f"1-minute load average when the run started; x tps, x p99: median of the "
                 f"per-run ratios to upstream with the same load")
    return "\n".join(lines)


def timeout_ok():
    if not re.fullmatch(r"\d+\s*(s|min)", TIMEOUT.strip()):
        sys.exit(f"BENCH_DDL_TIMEOUT: seconds (60s) or minutes (5min), not {TIMEOUT}")


def run_benchmark():
    """The benchmark itself (as the build user)."""
    if not benchlib.main_start(table, VARIANTS, "BENCH_DDL_VARIANTS"):
        return
    for v in VARIANTS:
        parse_variant(v)
    timeout_ok()
    os.makedirs(OUT, exist_ok=True)
    counter = Counter()
    counting = ("openat etc. counted with perf stat (syscall tracepoints)" if counter.req else
                f"system calls not counted ({counter.why_not})")
    header = (f"pgbench beside DDL loops: TPC-B-like, -M prepared -c {CLIENTS} -j {JOBS}, scale "
              f"{SCALE}, shared_buffers {SHARED_BUFFERS}, io_method worker (io_workers 3), "
              f"synchronous_commit off, checkpoint_timeout {TIMEOUT}, other settings default "
              f"(autovacuum on); ddl: queue loop (INSERT 10 rows, TRUNCATE) every {QUEUE_MS} ms "
              f"+ staging loop (CREATE TABLE, INSERT {STAGING_ROWS} rows, DROP TABLE) every "
              f"{STAGING_MS} ms; control: pgbench alone; {SECONDS} s (+{WARMUP} s warm-up) per "
              f"run, {RUNS} runs interleaved (alternating); {counting}; machine: "
              f"{benchlib.machine()}, load average at start "
              f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    clusters = [Cluster(v, benchlib.port("ddl", i), OUT) for i, v in enumerate(VARIANTS)]
    benchlib.run_and_report(header, clusters, RUNS,
                            lambda c, rep, pos: one_run(c, rep, pos, counter),
                            benchlib.stamped_csv("ddl"), FIELDS, table)


def main():
    if os.geteuid() != 0 or sys.argv[1:2] == ["--table"]:
        run_benchmark()
        return
    # root: run the benchmark as the build user, count for it with perf
    try:
        pw = pwd.getpwnam(BUILDER)
    except KeyError:
        sys.exit(f"no user {BUILDER} (scripts/lib.sh creates it: run through make bench-ddl)")
    env = dict(os.environ, HOME=pw.pw_dir, USER=pw.pw_name, LOGNAME=pw.pw_name)
    why_not = perf_usable()
    agent, fds = None, ()
    if why_not is None:
        req_r, req_w = os.pipe()
        ans_r, ans_w = os.pipe()
        fds = (req_w, ans_r)
        env["BENCH_DDL_AGENT"] = f"{req_w},{ans_r}"
    else:
        print(f"system calls not counted: {why_not}", flush=True)
        env["BENCH_DDL_NO_COUNTS"] = why_not
    child = subprocess.Popen([sys.executable, os.path.abspath(__file__)] + sys.argv[1:],
                             user=pw.pw_uid, group=pw.pw_gid, extra_groups=[], env=env,
                             cwd=os.environ["WORK"], pass_fds=fds)
    if fds:
        for fd in fds:
            os.close(fd)
        agent = PerfAgent(req_r, ans_w, pw.pw_uid)
    signal.signal(signal.SIGTERM, lambda *_: child.send_signal(signal.SIGTERM))
    while True:
        try:
            rc = child.wait()
            break
        except KeyboardInterrupt:   # the child got it too: let it stop its servers
            continue
    if agent:
        agent.th.join(5)
        agent.kill()
        shutil.rmtree(os.path.dirname(agent.out), ignore_errors=True)
    sys.exit(rc)


if __name__ == "__main__":
    main()
