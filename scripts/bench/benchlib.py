"""Shared pieces of the benchmarks (bench_immediate.py, bench_append.py,
bench_flush.py, bench_cleanup.py, bench_spread.py, bench_walpeak.py,
bench_volume.py, bench_ddl.py, with volume_sampler.py and volume_stalls.py): the
settings from the environment (BENCH_*, listed in README.md, section
Benchmarking), where the installations and the results are and which
ports the clusters use, a PostgreSQL cluster (initdb, pg_ctl, psql and
pgbench of one installation, listening on localhost only), interleaved runs written to CSV, the CPU
shares of a run, checkpoints and their write phases from the server log,
transaction latencies from pgbench -l logs and per-second progress from
pgbench -P, the settings of a variant, background samplers, gnuplot plots,
and the statistics and formatting helpers of the tables."""

import bisect
import csv
import gzip
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from datetime import datetime

# Scenarios of `make bench`: "all" and "random" are bench_immediate.py's
# immediate checkpoints, "append" is bench_append.py's append-heavy pgbench, "flush"
# is bench_flush.py's pgbench with small shared_buffers, "cleanup" is
# bench_cleanup.py's VACUUM loop under spread checkpoints.
SCENARIOS = ("all", "random", "append", "flush", "cleanup")


def settings(prefix, renamed_from=None, **defaults):
    """The settings PREFIX_NAME from the environment, one for each NAME=default
    and in that order, each converted to the type of its default: int,
    float, str, or a list (the value split on white space).  renamed_from: a
    former prefix of the same settings; one of those set is an error (a
    setting that would otherwise be ignored)."""
    res = []
    for name, default in defaults.items():
        var = f"{prefix}_{name}"
        if renamed_from and f"{renamed_from}_{name}" in os.environ:
            sys.exit(f"{renamed_from}_{name} is now called {var}")
        val = os.environ.get(var)
        if val is None:
            res.append(default)
        elif isinstance(default, list):
            res.append(val.split())
        else:
            try:
                res.append(type(default)(val))
            except ValueError:
                sys.exit(f"{var}: {val!r} is not a number")
    return res


def bench_scenarios():
    """The scenarios selected by BENCH_SCENARIOS (default: all of them)."""
    sel = os.environ.get("BENCH_SCENARIOS", " ".join(SCENARIOS)).split()
    unknown = [s for s in sel if s not in SCENARIOS]
    if unknown:
        sys.exit(f"BENCH_SCENARIOS: unknown scenario(s) {unknown}; known: {' '.join(SCENARIOS)}")
    return sel


def selected(scenario, what, runs, runs_var):
    """Whether BENCH_SCENARIOS selects 'scenario' and its runs ('runs', from
    'runs_var') are more than 0; if not, says that 'what' is skipped."""
    if scenario in bench_scenarios() and runs > 0:
        return True
    print(f"{what}: not selected (BENCH_SCENARIOS, {runs_var}), skipped")
    return False


def env_settings(variant, var="BENCH_SETTINGS"):
    """Extra settings of one variant from e.g. BENCH_SETTINGS =
    "patched:io_combine_limit=32;upstream:bgwriter_lru_maxpages=0"; a
    "prev:" variant has those of its base_variant."""
    s = {}
    for item in os.environ.get(var, "").split(";"):
        if ":" in item:
            name, kv = item.split(":", 1)
            if name.strip() == base_variant(variant) and "=" in kv:
                k, val = kv.split("=", 1)
                s[k.strip()] = val.strip()
    return s


def variant_settings(variant, implied=None, explicit=None, env_of=None):
    """The settings of a variant: 'implied' (what its name stands for, e.g.
    checkpoint_sort = off), then BENCH_SETTINGS' for 'env_of' (default: the
    variant; env_settings), then 'explicit' (settings the variant names
    itself, e.g. "series:debug_io_direct=data"); a later one's win."""
    s = dict(implied or {})
    s.update(env_settings(env_of or variant))
    s.update(explicit or {})
    return s


def pacing_settings(variant):
    """The checkpoint_wal_pacing of a variant named after a pacing mode
    ("linear", "prev:compensated", ...); none for "upstream"."""
    base = base_variant(variant)
    return {} if base == "upstream" else {"checkpoint_wal_pacing": base}


# Variants of the series that need a cluster of their own: io_method is a
# postmaster-only setting.  Their cluster is named like the variant.
IO_METHOD_CLUSTERS = {"patched-sync": "sync", "patched-uring": "io_uring"}

# "prev:<variant>" runs like <variant>, on a cluster of its own whose binaries
# are those of BENCH_PREV_INSTALL (a previous build of the series): the
# current and the previous series in the same interleaved runs.
PREV = "prev:"


def base_variant(variant):
    """The variant without its "prev:" prefix: what the scripts go by
    wherever they branch on the variant name."""
    return variant[len(PREV):] if variant.startswith(PREV) else variant


def cluster_of(variant):
    """The cluster a variant runs on: "upstream" (unpatched), a key of
    IO_METHOD_CLUSTERS (the series with that io_method), or "patched" (the
    series with the default io_method; every other variant, told apart by
    reloadable settings); "prev:" + that of <variant> for "prev:<variant>"."""
    base = base_variant(variant)
    name = base if base == "upstream" or base in IO_METHOD_CLUSTERS else "patched"
    return name if base == variant else PREV + name


def cluster_io_method(cluster):
    """The io_method of a cluster (a cluster_of name): "sync", "io_uring", or
    "worker" (the default; upstream and "patched")."""
    return IO_METHOD_CLUSTERS.get(base_variant(cluster), "worker")


def install_prefix(variant):
    """$WORK/inst-upstream for "upstream", BENCH_PREV_INSTALL for a "prev:"
    variant (exits if that is not set), $WORK/inst-release for the rest
    (every cluster of the series)."""
    cluster = cluster_of(variant)
    if cluster.startswith(PREV):
        prev = os.environ.get("BENCH_PREV_INSTALL")
        if cluster == PREV + "upstream":
            sys.exit(f"variant {variant}: \"prev:\" takes a variant of the series "
                     f"(e.g. prev:patched), not upstream")
        if not prev:
            sys.exit(f"variant {variant} needs BENCH_PREV_INSTALL: the installation of a "
                     f"previous build of the series (e.g. $WORK/inst-prev)")
        if not os.path.isfile(os.path.join(prev, "bin", "pg_ctl")):
            sys.exit(f"BENCH_PREV_INSTALL: no bin/pg_ctl in {prev}")
        return prev
    inst = "inst-upstream" if cluster == "upstream" else "inst-release"
    return os.path.join(os.environ["WORK"], inst)


def file_name(name):
    """A variant or cluster name as part of a file name: ":" (of "prev:")
    becomes "-"."""
    return name.replace(":", "-")


def bench_dir(*parts):
    """$WORK/bench (where the results go), or a path below it."""
    return os.path.join(os.environ["WORK"], "bench", *parts)


def stamped_csv(name):
    """$WORK/bench/NAME-<date>.csv, dated now."""
    return bench_dir(f"{name}-{datetime.now().strftime('%Y%m%d-%H%M%S')}.csv")


# Ports: BENCH_PORT [5600] + a fixed offset per script, so that the scripts
# never collide with each other: bench_immediate.py +0.., bench_spread.py
# +10/+11, bench_append.py +20.., bench_flush.py +30.., bench_cleanup.py +40..,
# bench_walpeak.py +50.., bench_volume.py +60.. (and the shell scripts
# bench_blocks_per_write.sh +70, bench_ab_same_cluster.sh +71), bench_ddl.py +80..
PORT_OFFSET = {"immediate": 0, "spread": 10, "append": 20, "flush": 30, "cleanup": 40,
               "walpeak": 50, "volume": 60, "ddl": 80}


def port(script, i=0):
    """The port of the i-th cluster of 'script' (a key of PORT_OFFSET)."""
    return int(os.environ.get("BENCH_PORT", "5600")) + PORT_OFFSET[script] + i


def build_port(script, cluster):
    """The port of a cluster of 'script' that has one cluster per build:
    port(script, 0) for "upstream", 1 for the series, 2 for a "prev:" one."""
    return port(script, 0 if cluster == "upstream" else 2 if cluster.startswith(PREV) else 1)


def machine():
    reclaim = proactive_reclaim()
    return (f"{os.cpu_count()} cores, {os.uname().release}" +
            (f", proactive reclaim: {reclaim}" if reclaim else ""))


def proactive_reclaim():
    """The kernel's proactive reclaim, if a DAMON scheme pages memory out:
    some hosts run one, which evicts page cache that has been idle for a
    while though memory is free, so that data "in the page cache" is partly
    read back from the device, and those reads (on a throttled volume,
    queued behind writes) are what makes the block layer's writeback
    throttling scale down.  "" if none (or not readable)."""
    return "; ".join(f"DAMON pages out memory idle for {age:g} s or more"
                     for _, age in damon_pageout())


def damon_pageout():
    """[(kdamond directory, minimum idle seconds)] of the running DAMON
    threads (sysfs admin interface) with a pageout scheme."""
    base = "/sys/kernel/mm/damon/admin/kdamonds"

    def rd(*path):
        with open(os.path.join(*path)) as f:
            return f.read().strip()
    found = []
    try:
        for k in sorted(os.listdir(base)):
            kd = os.path.join(base, k)
            if not os.path.isdir(kd) or rd(kd, "state") != "on":
                continue
            for c in sorted(os.listdir(os.path.join(kd, "contexts"))):
                ctx = os.path.join(kd, "contexts", c)
                if not os.path.isdir(ctx):
                    continue
                aggr_s = int(rd(ctx, "monitoring_attrs", "intervals", "aggr_us")) / 1e6
                for n in sorted(os.listdir(os.path.join(ctx, "schemes"))):
                    sch = os.path.join(ctx, "schemes", n)
                    if os.path.isdir(sch) and rd(sch, "action") == "pageout":
                        found.append((kd, int(rd(sch, "access_pattern", "age", "min")) * aggr_s))
    except (OSError, ValueError):
        pass
    return found


def meminfo_kb(*keys):
    """{key: kB} of the lines 'keys' of /proc/meminfo ("Dirty", ...); keys
    not found (or the file not readable) are left out."""
    res = {}
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in keys:
                    res[k] = int(v.split()[0])
    except (OSError, ValueError, IndexError):
        pass
    return res


def mem_total_mb():
    """MemTotal of /proc/meminfo in MB, or None if not readable."""
    kb = meminfo_kb("MemTotal").get("MemTotal")
    return None if kb is None else kb // 1024


def settings_conf(*variants, var="BENCH_SETTINGS"):
    """The extra settings of 'variants' (env_settings; a later one's win) as
    postgresql.conf lines."""
    s = {}
    for v in variants:
        s.update(env_settings(v, var))
    return "".join(f"{k} = '{val}'\n" for k, val in s.items())


def io_conf(mode):
    """postgresql.conf lines of an I/O mode: "buffered" (none) or "direct"
    (debug_io_direct = 'data': every write waits for the device)."""
    return "debug_io_direct = 'data'\n" if mode == "direct" else ""


def pgbench_jobs(clients):
    """pgbench -j for 'clients' clients: one thread per client, at most one per core."""
    return max(1, min(clients, os.cpu_count() or 1))


def pgbench_args(clients, jobs):
    """The pgbench options of every workload: prepared statements, no vacuum."""
    return ["-M", "prepared", "-c", str(clients), "-j", str(jobs), "-n"]


# pgbench's tables and indexes (pgbench_history has none), for pg_prewarm
PGBENCH_RELATIONS = ("pgbench_accounts", "pgbench_accounts_pkey", "pgbench_branches",
                     "pgbench_tellers", "pgbench_branches_pkey", "pgbench_tellers_pkey")

# the processes that are not the checkpointer: with the data in
# shared_buffers, the buffers they write (pg_stat_io) stay near 0
OTHER_WRITERS = ("client backend", "background writer")


def check_variants(variants, var):
    if len(set(variants)) != len(variants):
        sys.exit(f"{var}: a variant is named twice: {variants}")


def main_start(table, variants, variants_var, selection=None, default=None, read=None):
    """The start of a benchmark's main(): with --table, print the table again
    (table_again(table, default, read)) and return False; with 'selection' =
    (scenario, what, runs, runs_var), return False if BENCH_SCENARIOS or the
    runs leave the benchmark out (selected); else check the variants
    (check_variants(variants, variants_var)) and return True: run it."""
    if table_again(table, default, read):
        return False
    if selection and not selected(*selection):
        return False
    check_variants(variants, variants_var)
    return True


class Cluster:
    """A cluster named 'name' in outdir/data-NAME, logging to
    outdir/server-NAME.log, of the installation 'prefix' (default:
    install_prefix(name))."""

    def __init__(self, name, port, outdir, prefix=None):
        self.name, self.port, self.outdir = name, port, outdir
        self.prefix = prefix or install_prefix(name)
        self.data = os.path.join(outdir, "data-" + file_name(name))
        self.log = os.path.join(outdir, "server-" + file_name(name) + ".log")

    def bin(self, prog):
        return os.path.join(self.prefix, "bin", prog)

    def env(self):
        return dict(os.environ, PGHOST="localhost", PGPORT=str(self.port),
                    PGDATABASE="postgres")

    def psql(self, sql):
        r = subprocess.run([self.bin("psql"), "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1",
                            "-h", "localhost", "-p", str(self.port), "-d", "postgres",
                            "-c", sql], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"psql on {self.name} failed: {r.stderr}")
        return r.stdout.strip()

    def session(self, *args, appname=None, stderr=None):
        """A psql session fed through stdin (text, line-buffered), with the
        psql options 'args'."""
        env = self.env() if appname is None else dict(self.env(), PGAPPNAME=appname)
        return subprocess.Popen([self.bin("psql"), "-X", "-q", "-At"] + list(args), env=env,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                                text=True, bufsize=1)

    def prewarm(self, *relations):
        """pg_prewarm the relations (names)."""
        self.psql("CREATE EXTENSION IF NOT EXISTS pg_prewarm; SELECT sum(pg_prewarm(c)) FROM "
                  "unnest(ARRAY[" + ", ".join(f"'{r}'" for r in relations) + "]::regclass[]) c")

    def checkpoints_done(self):
        return int(self.psql("SELECT num_done FROM pg_stat_checkpointer"))

    def pgbench(self, *args):
        """Run pgbench against this server; exit on failure.  Returns the
        CompletedProcess (stdout: the summary, stderr: -P progress lines)."""
        r = subprocess.run([self.bin("pgbench")] + list(args), env=self.env(),
                           capture_output=True, text=True)
        if r.returncode:
            sys.exit(f"pgbench on {self.name} failed: {r.stderr[-2000:]}")
        return r

    def pg_ctl(self, *args):
        subprocess.run([self.bin("pg_ctl"), "-D", self.data, "-l", self.log, "-w"] + list(args),
                       check=True, stdout=subprocess.DEVNULL)

    def stop_if_running(self):
        """Fast shutdown if the server runs; for cleanup paths, never fails."""
        if os.path.exists(os.path.join(self.data, "postmaster.pid")):
            subprocess.run([self.bin("pg_ctl"), "-D", self.data, "-w", "-m", "fast", "stop"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def set_settings(self, settings):
        """ALTER SYSTEM: exactly 'settings' (dict) on top of postgresql.conf,
        reloaded, and wait until new sessions see them."""
        # forget the settings of a variant that ran before on this cluster
        self.psql("ALTER SYSTEM RESET ALL")
        for k, val in settings.items():
            self.psql(f"ALTER SYSTEM SET {k} = '{val}'")
        self.psql("SELECT pg_reload_conf()")
        # new sessions see the reloaded values once the postmaster has
        # reloaded, which is after it has signalled the checkpointer
        for k, val in settings.items():
            for _ in range(100):
                if self.psql(f"SHOW {k}") == val:
                    break
                time.sleep(0.05)
            else:
                sys.exit(f"{k} did not become {val} on {self.name}")

    def io_writes(self, backend_types, context="normal"):
        """{backend_type: (writes, write_bytes)} from pg_stat_io, object
        relation, for one context (None: all contexts summed)."""
        where = "" if context is None else f" AND context = '{context}'"
        types = ", ".join(f"'{t}'" for t in backend_types)
        out = self.psql("SELECT backend_type, coalesce(sum(writes), 0), "
                        "coalesce(sum(write_bytes), 0) FROM pg_stat_io "
                        f"WHERE object = 'relation' AND backend_type IN ({types}){where} "
                        "GROUP BY backend_type")
        res = {t: (0, 0) for t in backend_types}
        for line in out.splitlines():
            t, w, b = line.split("|")
            res[t] = (int(w), int(b))
        return res

    def other_writes(self):
        """Buffers written by OTHER_WRITERS so far, in all I/O contexts."""
        return sum(b for _, b in self.io_writes(OTHER_WRITERS, context=None).values()) // 8192

    def cpu_seconds(self):
        """CPU time (user + system, seconds) of the running server: the
        postmaster with its reaped children, and its live children."""
        with open(os.path.join(self.data, "postmaster.pid")) as f:
            pm = int(f.readline())
        ticks = 0
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open(f"/proc/{d}/stat") as f:
                    st = f.read()
            except OSError:     # exited meanwhile
                continue
            # after "(comm) ": state ppid ... utime stime cutime cstime (fields 3, 4, 14-17)
            fields = st[st.rindex(")") + 2:].split()
            if int(d) == pm:
                ticks += sum(int(x) for x in fields[11:15])
            elif int(fields[1]) == pm:
                ticks += int(fields[11]) + int(fields[12])
        return ticks / os.sysconf("SC_CLK_TCK")

    def init(self, settings):
        """initdb with data checksums, then append 'settings' to postgresql.conf."""
        if os.path.exists(self.data):
            shutil.rmtree(self.data)
        subprocess.run([self.bin("initdb"), "-D", self.data, "--data-checksums", "-A", "trust",
                        "-E", "UTF8", "--locale=C.UTF-8"], check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(self.data, "postgresql.conf"), "a") as f:
            f.write(f"\nport = {self.port}\nlisten_addresses = 'localhost'\n"
                    f"unix_socket_directories = ''\n")
            f.write(settings)


def client_cpu():
    """CPU seconds of our finished child processes: pgbench, psql."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def machine_busy():
    """CPU seconds that the machine's CPUs spent not idle (/proc/stat)."""
    with open("/proc/stat") as f:
        ticks = [int(x) for x in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal (guest is in user)
    return (sum(ticks[:8]) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


class CpuShares:
    """The machine's CPU time from now on: the share used by the server of
    cluster 'c' and our clients (pgbench, psql), and the share used by
    anything else (other load: a noisy run)."""

    def __init__(self, c):
        self.c = c
        self.cpu0, self.busy0 = c.cpu_seconds() + client_cpu(), machine_busy()

    def shares(self, seconds):
        """(cpu_share, other_cpu_share) over the 'seconds' since the start,
        rounded; call while the server runs."""
        ncpu = os.cpu_count() or 1
        cpu = (self.c.cpu_seconds() + client_cpu() - self.cpu0) / seconds / ncpu
        busy = (machine_busy() - self.busy0) / seconds / ncpu
        return round(cpu, 3), round(max(0, busy - cpu), 3)


class Sampler:
    """A thread that runs self.loop() from its creation until stop(), which
    returns self.samples.  A subclass sets what its loop needs before it
    calls Sampler.__init__ (the thread starts there); the loop appends to
    self.samples until self.stop_ev is set."""

    def __init__(self):
        self.samples, self.stop_ev = [], threading.Event()
        self.th = threading.Thread(target=self.loop)
        self.th.start()

    def loop(self):
        raise NotImplementedError

    def stop(self):
        self.stop_ev.set()
        self.th.join()
        return self.samples


def reap(p, timeout, sig=None):
    """Wait up to 'timeout' seconds for process p to end, first sending it
    'sig' if it still runs; kill it if it does not end."""
    if sig is not None and p.poll() is None:
        p.send_signal(sig)
    try:
        p.wait(timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


class CsvOut:
    """A CSV file (csv.DictWriter, columns 'fields') written row by row, each
    write flushed, so that an interrupted benchmark keeps what it measured."""

    def __init__(self, path, fields):
        self.f = open(path, "w", newline="")
        self.writer = csv.DictWriter(self.f, fieldnames=fields)
        self.writer.writeheader()

    def write(self, rows):
        self.writer.writerows(rows)
        self.f.flush()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()


def write_csv(path, fields, rows):
    """A CSV file with columns 'fields' and 'rows' (dicts)."""
    with CsvOut(path, fields) as out:
        out.write(rows)


def alternating(clusters, rep):
    """Run 'rep''s order: odd runs in order, even runs in reverse order."""
    return clusters if rep % 2 else clusters[::-1]


def rotated(items, rep):
    """Run 'rep''s order: the list rotated by rep - 1 (run 1 in the listed
    order, run 2 from the second item, ...)."""
    k = (rep - 1) % len(items)
    return items[k:] + items[:k]


def exit_on_sigterm():
    """From now on SIGTERM ends the script like ^C: its finally clauses run."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("terminated"))


def run_interleaved(clusters, runs, one_run, csv_path, fields, order=alternating, usable=None):
    """Interleaved runs, one server at a time: for run 1..runs, for each
    cluster in order(clusters, run), row = one_run(cluster, run, position in
    that order, from 1), written to csv_path (CSV with columns 'fields') as
    it comes.  The orders (alternating, rotated) keep a variant from always
    going first, so that whatever the machine did just before a run hits
    each variant alike.  The clusters are initialized first (their outdir
    made, their init()), then usable(clusters), if given, says which of
    them run (none: exit); every server is stopped at the end, also on an
    error or SIGTERM.  Returns the rows."""
    exit_on_sigterm()     # the finally clause stops the servers
    rows = []
    try:
        for c in clusters:
            os.makedirs(c.outdir, exist_ok=True)
            c.stop_if_running()     # left over from an interrupted run
            c.init()
        active = clusters if usable is None else usable(clusters)
        if not active:
            sys.exit("no variant left to run")
        with CsvOut(csv_path, fields) as out:
            for rep in range(1, runs + 1):
                for pos, c in enumerate(order(active, rep), 1):
                    say_run(rep, c.name)
                    rows.append(one_run(c, rep, pos))
                    out.write(rows[-1:])
    finally:
        for c in clusters:
            c.stop_if_running()
    return rows


def run_and_report(header, clusters, runs, one_run, csv_path, fields, table, txt_path=None,
                   **how):
    """A benchmark of interleaved runs from start to end: print 'header',
    run_interleaved(clusters, runs, one_run, csv_path, fields, **how), then
    report table(rows, header), written to txt_path (default: csv_path with
    .txt for .csv).  Returns the rows."""
    print(header, flush=True)
    start = time.monotonic()
    rows = run_interleaved(clusters, runs, one_run, csv_path, fields, **how)
    report(table(rows, header), start, csv_path, txt_path or csv_path[:-4] + ".txt")
    return rows


def report(table_text, start, csv_path, txt_path):
    """Print the table with the total time since 'start' (time.monotonic())
    and write it to txt_path."""
    text = table_text + f"\ntotal time {time.monotonic() - start:.0f} s; CSV: {csv_path}\n"
    print()
    print(text, end="")
    with open(txt_path, "w") as f:
        f.write(text)


def print_run(row, skip=("run", "variant")):
    """A run's results on one line (all but the fields 'skip')."""
    print("  " + ", ".join(f"{k}={v}" for k, v in row.items() if k not in skip), flush=True)


def say_run(rep, what, kind="run"):
    """Say which run starts: "run 2: patched"."""
    print(f"{kind} {rep}: {what}", flush=True)


def table_again(table, default=None, read=None):
    """With the arguments --table [FILE.csv] (FILE: only when there is no
    'default' path): print table(rows, "(from FILE)") from that CSV, read
    by 'read' (default read_csv); returns whether it did."""
    args = sys.argv[1:]
    if args[:1] != ["--table"] or len(args) > 2 or (len(args) == 1 and default is None):
        return False
    path = args[1] if len(args) == 2 else default
    print(table((read or read_csv)(path), "(from " + path + ")"))
    return True


def pgbench_summary(out):
    """tps, transactions and average latency (ms) from pgbench's summary."""
    def num(pattern, conv):
        m = re.search(pattern, out)
        return conv(m.group(1)) if m else None
    return dict(tps=num(r"tps = ([\d.]+)", float),
                transactions=num(r"number of transactions actually processed: (\d+)", int),
                lat_ms=num(r"latency average = ([\d.]+) ms", float))


def progress(stderr, rounded=False):
    """{second: (tps, latency ms)} from pgbench -P 1's progress lines
    "progress: 12.0 s, 4567.8 tps, lat 0.875 ms stddev ..." (latency NaN, in
    a second without transactions: 0.0); the second is the line's time cut
    to a whole number, or rounded to the nearest one."""
    prog = {}
    for line in stderr.splitlines():
        m = re.match(r"progress: ([\d.]+) s, ([\d.]+) tps, lat ([\d.]+|NaN) ms", line)
        if m:
            lat = float(m.group(3)) if m.group(3) != "NaN" else 0.0
            t = float(m.group(1))
            prog[int(round(t)) if rounded else int(t)] = (float(m.group(2)), lat)
    return prog


# Checkpoints from the server log.  The parsers need these settings: the
# timestamps of log_line_prefix place the phases in time.
LOG_SETTINGS = "log_checkpoints = on\nlog_line_prefix = '%m [%p] '\n"


def parse_ts(s):
    return datetime.strptime(s[:23], "%Y-%m-%d %H:%M:%S.%f").timestamp()


START = re.compile(r"^(\S+ \S+) \S+ \[\d+\] LOG:  checkpoint starting: (.*)$")
# stock 18.6's "checkpoint complete" line; the series appends "; sort=S.SSS s"
DONE = re.compile(r"^(\S+ \S+) \S+ \[\d+\] LOG:  checkpoint complete: wrote (\d+) buffers.*"
                  r"write=([\d.]+) s, sync=([\d.]+) s, total=([\d.]+) s.*distance=(\d+) kB"
                  r"(?:.*; sort=([\d.]+) s)?")


def parse_done(m):
    """A DONE match as a dict: end (epoch), buffers, write_s, sync_s,
    total_s, distance_kb, sort_s (None: not logged, as by upstream)."""
    return dict(end=parse_ts(m.group(1)), buffers=int(m.group(2)), write_s=float(m.group(3)),
                sync_s=float(m.group(4)), total_s=float(m.group(5)),
                distance_kb=int(m.group(6)), sort_s=float(m.group(7)) if m.group(7) else None)


def log_lines(logfile, offset):
    with open(logfile, errors="replace") as f:
        f.seek(offset)
        return f.read().splitlines()


def last_checkpoint_complete(logfile, offset):
    """The last "checkpoint complete" line after byte 'offset' of the log,
    parsed (parse_done), or None."""
    res = None
    for line in log_lines(logfile, offset):
        m = DONE.match(line)
        if m:
            res = parse_done(m)
    return res


def checkpoints(logfile, offset, t0, t1):
    """Checkpoints logged after byte 'offset' of the log that overlap [t0, t1],
    as dicts: start, write_end, end (epoch seconds), flags ("wal", "time",
    "immediate force wait", ...), buffers, distance_kb, complete (False: still
    running at t1).  The write phase is [start, write_end): the complete
    line's total and write times counted from its own timestamp."""
    res, cur = [], None
    for line in log_lines(logfile, offset):
        m = START.match(line)
        if m:
            cur = (parse_ts(m.group(1)), m.group(2))
            continue
        m = DONE.match(line)
        if m and cur:
            d = parse_done(m)
            start = d["end"] - d["total_s"]
            res.append(dict(start=start, write_end=start + d["write_s"], end=d["end"],
                            flags=cur[1], buffers=d["buffers"], distance_kb=d["distance_kb"],
                            complete=True))
            cur = None
    if cur:
        # still running when the run ended: count it as writing until then
        res.append(dict(start=cur[0], write_end=t1, end=t1, flags=cur[1], buffers=0,
                        distance_kb=0, complete=False))
    return [c for c in res if c["end"] >= t0 and c["start"] <= t1]


def of_kinds(ckpts, kinds):
    """The checkpoints whose flags name one of 'kinds' (e.g. "wal", "time")."""
    return [k for k in ckpts if set(k["flags"].split()) & set(kinds)]


def write_phase_seconds(ckpts, t0, t1):
    """Seconds of [t0, t1] in the write phases of 'ckpts', rounded to 0.1."""
    return round(sum(max(0, min(k["write_end"], t1) - max(k["start"], t0)) for k in ckpts), 1)


def write_phase_test(ckpts, kinds=("wal",)):
    """A function ts -> whether ts is in the write phase of one of 'ckpts'
    whose flags name one of 'kinds'."""
    phases = [(k["start"], k["write_end"]) for k in of_kinds(ckpts, kinds)]
    return lambda ts: any(s <= ts < e for s, e in phases)


def tx_records(logdir):
    """(script number, end epoch, latency us) of every transaction of the
    pgbench -l logs in 'logdir', whose lines are
    "client tx time_us script epoch us [...]"."""
    for fn in os.listdir(logdir):
        with open(os.path.join(logdir, fn)) as f:
            for line in f:
                parts = line.split()
                if len(parts) < 6:
                    continue
                yield int(parts[3]), int(parts[4]) + int(parts[5]) / 1e6, int(parts[2])


def tx_latencies(logdir, in_write):
    """Transaction latencies (ms) of the pgbench -l logs in 'logdir', split by
    whether the transaction started in a write phase (in_write(epoch)):
    {script number: (in write phases, outside)}."""
    res = {}
    for script, end, lat_us in tx_records(logdir):
        pair = res.setdefault(script, ([], []))
        (pair[0] if in_write(end - lat_us / 1e6) else pair[1]).append(lat_us / 1000)
    return res


def tx_ends(logdir):
    """[(end epoch, latency ms)] of the transactions of the pgbench -l logs
    in 'logdir', sorted by end (for tx_in)."""
    return sorted((end, lat_us / 1000) for _, end, lat_us in tx_records(logdir))


def tx_in(txs, a, b):
    """(transactions per second, longest latency ms) of the transactions of
    'txs' (tx_ends) that ended in [a, b) (epochs)."""
    i, j = bisect.bisect_left(txs, (a,)), bisect.bisect_left(txs, (b,))
    return (j - i) / (b - a), max((x[1] for x in txs[i:j]), default=0.0)


# Statistics and formatting for the tables

def pct(vals, q):
    if not vals:
        return None
    vals = sorted(vals)
    return vals[min(len(vals) - 1, int(q * len(vals)))]


def median_of(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def ratio(a, b):
    return a / b if a is not None and b else None


def round_or_none(v, digits=3):
    return None if v is None else round(v, digits)


def fmt(v, d=3):
    return "-" if v is None else f"{v:.{d}f}"


def med(rows, key):
    """The median of 'key' over 'rows' (None values left out)."""
    return median_of([r[key] for r in rows])


def variants_of(rows):
    """The variants of 'rows', in the order they first come."""
    return list(dict.fromkeys(r["variant"] for r in rows))


def medians(rows, variants, keys):
    """{variant: {key: median over that variant's rows}}."""
    return {v: {k: med([r for r in rows if r["variant"] == v], k) for k in keys}
            for v in variants}


def mb_s(nbytes, seconds, mb=1048576):
    """MB/s of 'nbytes' in 'seconds' (MB = 'mb' bytes: 2^20, or 1e6 where
    the device's MB/s are meant); None without bytes or time."""
    return nbytes / mb / seconds if nbytes is not None and seconds and seconds > 0 else None


def fmt_all(vals, d=3):
    """The values, formatted (fmt) and separated by spaces."""
    return " ".join(fmt(v, d) for v in vals)


def per_run_text(per_run):
    """Per-run ratios and their median: "0.985 1.091 0.979, median 0.985"."""
    return f"{fmt_all(per_run)}, median {fmt(median_of(per_run))}"


def ruled(heads):
    """A table's line of column heads and a rule as long as it, as two lines."""
    return [heads, "-" * len(heads)]


def col_heads(cols, width):
    """The heads of columns cols = [(key, head, decimals)], right-aligned in
    'width' characters and separated by spaces."""
    return " ".join(f"{h:>{width}}" for _, h, _ in cols)


def col_cells(values, cols, width):
    """values[key] for columns cols = [(key, head, decimals)], formatted
    (fmt, with the column's decimals) as col_heads() aligns the heads."""
    return " ".join(f"{fmt(values[k], d):>{width}}" for k, _, d in cols)


def paired_ratios(rows, variant, key, same=("run",), base="upstream"):
    """key of 'variant' / key of 'base', for each row of 'variant' and the
    row of 'base' that agrees with it on the fields 'same' (the same run):
    ratios within a run, which other load on the machine hits alike."""
    return [ratio(x[key], y[key]) for x in rows if x["variant"] == variant
            for y in rows if y["variant"] == base and all(x[f] == y[f] for f in same)]


def median_ratio(rows, variant, key, base="upstream", same=("run",)):
    """The median of paired_ratios(): of 'variant' to 'base' within each run."""
    return median_of(paired_ratios(rows, variant, key, same=same, base=base))


def read_csv(path):
    """Rows of a CSV written by a benchmark, numbers as int or float, empty
    fields as None."""
    def conv(v):
        if v == "":
            return None
        for t in (int, float):
            try:
                return t(v)
            except ValueError:
                pass
        return v
    with open_text(path) as f:
        return [{k: conv(v) for k, v in r.items()} for r in csv.DictReader(f)]


def open_text(path):
    """A text file opened for reading; gunzipped on the fly if it ends in .gz
    (the per-second CSVs in bench-results/)."""
    return gzip.open(path, "rt") if path.endswith(".gz") else open(path)


# Plots (gnuplot, PNG): a panel per variant, one above the other

def have_gnuplot():
    """Whether gnuplot is installed; says so if not."""
    if shutil.which("gnuplot"):
        return True
    print("gnuplot not installed: no plots")
    return False


def multiplot_head(png, height, panels, title):
    """The first lines of a gnuplot script drawing 'panels' panels, one
    above the other, into 'png' (1400 pixels wide, 'height' high)."""
    return [f"set terminal pngcairo noenhanced size 1400,{height} font ',9'",
            f"set output '{png}'",
            f"set multiplot layout {panels},1 title '{title}'"]


def write_dat(path, rows, keys):
    """A gnuplot data file: per row, its values of 'keys', separated by spaces."""
    with open(path, "w") as f:
        for r in rows:
            f.write(" ".join(str(r[k]) for k in keys) + "\n")


def gnuplot(script, png):
    """Run gnuplot on the lines 'script' of a multiplot_head() script (it
    ends the multiplot) and say where the plot is."""
    subprocess.run(["gnuplot"], input="\n".join(script + ["unset multiplot"]), text=True,
                   check=True)
    print(f"plot: {png}", flush=True)
