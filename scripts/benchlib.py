"""Shared pieces of the benchmarks: a PostgreSQL cluster (initdb, pg_ctl and
psql of one installation, listening on localhost only), the benchmark
selection and per-variant settings from the environment, checkpoints and
their write phases from the server log, and transaction latencies from
pgbench -l logs."""

import os
import re
import shutil
import statistics
import subprocess
import sys
from datetime import datetime

# Scenarios of `make bench`: "all" and "random" are bench.py's immediate
# checkpoints, "append" is bench_append.py's append-heavy pgbench.
SCENARIOS = ("all", "random", "append")


def bench_scenarios():
    """The scenarios selected by BENCH_SCENARIOS (default: all of them)."""
    sel = os.environ.get("BENCH_SCENARIOS", " ".join(SCENARIOS)).split()
    unknown = [s for s in sel if s not in SCENARIOS]
    if unknown:
        sys.exit(f"BENCH_SCENARIOS: unknown scenario(s) {unknown}; known: {' '.join(SCENARIOS)}")
    return sel


def env_settings(variant, var="BENCH_SETTINGS"):
    """Extra settings of one variant from e.g. BENCH_SETTINGS =
    "patched:io_combine_limit=32;upstream:bgwriter_lru_maxpages=0"."""
    s = {}
    for item in os.environ.get(var, "").split(";"):
        if ":" in item:
            name, kv = item.split(":", 1)
            if name.strip() == variant and "=" in kv:
                k, val = kv.split("=", 1)
                s[k.strip()] = val.strip()
    return s


class Cluster:
    def __init__(self, name, prefix, port, outdir):
        self.name, self.prefix, self.port = name, prefix, port
        self.data = os.path.join(outdir, "data-" + name)
        self.log = os.path.join(outdir, "server-" + name + ".log")

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

    def pg_ctl(self, *args):
        subprocess.run([self.bin("pg_ctl"), "-D", self.data, "-l", self.log, "-w"] + list(args),
                       check=True, stdout=subprocess.DEVNULL)

    def stop_if_running(self):
        """Fast shutdown if the server runs; for cleanup paths, never fails."""
        if os.path.exists(os.path.join(self.data, "postmaster.pid")):
            subprocess.run([self.bin("pg_ctl"), "-D", self.data, "-w", "-m", "fast", "stop"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

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


# Checkpoints from the server log.  checkpoints() needs these settings: the
# timestamps of log_line_prefix place the phases in time.
LOG_SETTINGS = "log_checkpoints = on\nlog_line_prefix = '%m [%p] '\n"


def parse_ts(s):
    return datetime.strptime(s[:23], "%Y-%m-%d %H:%M:%S.%f").timestamp()


START = re.compile(r"^(\S+ \S+) \S+ \[\d+\] LOG:  checkpoint starting: (.*)$")
DONE = re.compile(r"^(\S+ \S+) \S+ \[\d+\] LOG:  checkpoint complete: wrote (\d+) buffers.*"
                  r"write=([\d.]+) s, sync=([\d.]+) s, total=([\d.]+) s.*distance=(\d+) kB")


def checkpoints(logfile, offset, t0, t1):
    """Checkpoints logged after byte 'offset' of the log that overlap [t0, t1],
    as dicts: start, write_end, end (epoch seconds), flags ("wal", "time",
    "immediate force wait", ...), buffers, distance_kb.  The write phase is
    [start, write_end): the complete line's total and write times counted
    from its own timestamp."""
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


def write_phase_test(ckpts, kinds=("wal",)):
    """A function ts -> whether ts is in the write phase of one of 'ckpts'
    whose flags name one of 'kinds' (e.g. "wal", "time")."""
    phases = [(k["start"], k["write_end"]) for k in ckpts
              if set(k["flags"].split()) & set(kinds)]
    return lambda ts: any(s <= ts < e for s, e in phases)


def tx_latencies(logdir, in_write):
    """Transaction latencies (ms) of the pgbench -l logs in 'logdir', split by
    whether the transaction started in a write phase (in_write(epoch)):
    {script number: (in write phases, outside)}.  Log lines are
    "client tx time_us script epoch us [...]"."""
    res = {}
    for fn in os.listdir(logdir):
        with open(os.path.join(logdir, fn)) as f:
            for line in f:
                parts = line.split()
                if len(parts) < 6:
                    continue
                lat_us = int(parts[2])
                end = int(parts[4]) + int(parts[5]) / 1e6
                pair = res.setdefault(int(parts[3]), ([], []))
                (pair[0] if in_write(end - lat_us / 1e6) else pair[1]).append(lat_us / 1000)
    return res


def pct(vals, q):
    if not vals:
        return None
    vals = sorted(vals)
    return vals[min(len(vals) - 1, int(q * len(vals)))]


def median_of(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None
