#!/usr/bin/python3
"""Immediate-checkpoint benchmark: unpatched PostgreSQL vs the patch series.

One table that fits in shared_buffers, with fillfactor 50 and ~1 kB rows
(3 per page), so that an UPDATE of a non-indexed column is a HOT update that
dirties the heap pages of the rows it updates and nothing else.  Scenarios:
  all      every page dirty ("immediate checkpoint with all buffers dirty");
  random   a pseudo-random quarter of the pages dirty (gaps everywhere).
Each run dirties the table, counts the dirty buffers (pg_buffercache_summary),
runs CHECKPOINT and records:
  - write, sync, total and sort time from the "checkpoint complete" line;
  - the checkpointer's writes and write_bytes from pg_stat_io
    (backend_type checkpointer, object relation, context normal).

Every variant has its own cluster, loaded with identical data, and all of them
run side by side; runs are interleaved (upstream, patched, ... , upstream,
patched, ...) so that drift of the machine hits every variant alike.  The
table shows medians and the patched/upstream ratio of the medians.

Configuration through the environment (defaults in brackets):
  BENCH_MB [1024]        table size in MB
  BENCH_RUNS [3]         runs per variant, I/O mode and scenario
  BENCH_SCENARIOS ["all random append"]   scenarios of `make bench`; "append"
                         is bench_append.py's (run after this script by
                         bench.sh); without "all" and "random" this script
                         does nothing
  BENCH_IO ["buffered direct"]   I/O modes; direct = debug_io_direct=data
  BENCH_VARIANTS ["upstream patched patched-nosort"]
  BENCH_SETTINGS ["patched:"]    extra settings per variant, e.g.
                         "patched:io_combine_limit=32" (';'-separated)
"""

import csv
import os
import re
import shutil
import subprocess
import sys
import time

import benchlib

WORK = os.environ["WORK"]
OUT = os.path.join(WORK, "bench")
MB = int(os.environ.get("BENCH_MB", "1024"))
RUNS = int(os.environ.get("BENCH_RUNS", "3"))
DIRTY = {"all": "UPDATE bench SET n = n + 1",
         "random": "UPDATE bench SET n = n + 1 WHERE hashint4(id / 3) % 4 = 0"}
SCENARIOS = [s for s in benchlib.bench_scenarios() if s in DIRTY]
IO_MODES = os.environ.get("BENCH_IO", "buffered direct").split()
VARIANTS = os.environ.get("BENCH_VARIANTS", "upstream patched patched-nosort").split()

# variant -> (install prefix, cluster name, extra settings)
PREFIX = {"upstream": os.path.join(WORK, "inst-upstream"),
          "patched": os.path.join(WORK, "inst-release")}
BASE_PORT = 5600

# ~1 kB rows, 3 per page at fillfactor 50: 8 kB page per 3 rows
ROWS = MB * 1024 * 1024 // 8192 * 3


def variant_install(v):
    return PREFIX["upstream" if v == "upstream" else "patched"]


def variant_cluster(v):
    # patched and patched-nosort share one cluster: only a reloadable GUC differs
    return "upstream" if v == "upstream" else "patched"


def variant_settings(v):
    s = {}
    if v == "patched-nosort":
        s["checkpoint_sort"] = "off"
    elif v.startswith("patched"):
        s["checkpoint_sort"] = "on"
    s.update(benchlib.env_settings(v))
    return s


class Cluster(benchlib.Cluster):
    def __init__(self, name, prefix, port):
        super().__init__(name, prefix, port, OUT)

    def init(self, shared_buffers_mb):
        super().init(f"""shared_buffers = {shared_buffers_mb}MB
max_wal_size = 50GB
checkpoint_timeout = 1d
log_checkpoints = on
autovacuum = off
# the setup writes much WAL; none of this changes how the checkpoint writes
wal_level = minimal
max_wal_senders = 0
full_page_writes = off
synchronous_commit = off
include_if_exists = 'bench.conf'
""")

    def set_io(self, mode):
        with open(os.path.join(self.data, "bench.conf"), "w") as f:
            if mode == "direct":
                f.write("debug_io_direct = 'data'\n")

    def set_variant(self, v):
        settings = variant_settings(v)
        # forget the settings of another variant sharing this cluster
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


# stock 18.6's line; the series appends "; sort=S.SSS s" at the very end
LINE = re.compile(r"checkpoint complete: wrote (\d+) buffers .* write=([\d.]+) s, "
                  r"sync=([\d.]+) s, total=([\d.]+) s;.*?(?:; sort=([\d.]+) s)?$", re.M)


def last_complete_line(path, offset):
    with open(path, errors="replace") as f:
        f.seek(offset)
        text = f.read()
    m = None
    for m in LINE.finditer(text):
        pass
    return m


def ckpt_io(c):
    return [int(x) for x in c.psql(
        "SELECT coalesce(sum(writes),0), coalesce(sum(write_bytes),0) FROM pg_stat_io "
        "WHERE backend_type = 'checkpointer' AND object = 'relation' AND context = 'normal'").split("|")]


def one_run(c, v, mode, scenario, run, writer):
    c.set_variant(v)
    c.psql(DIRTY[scenario])
    dirty = int(c.psql("SELECT buffers_dirty FROM pg_buffercache_summary()"))
    done_before = int(c.psql("SELECT num_done FROM pg_stat_checkpointer"))
    w0, b0 = ckpt_io(c)
    offset = os.path.getsize(c.log)
    t0 = time.monotonic()
    c.psql("CHECKPOINT")
    wall = time.monotonic() - t0
    for _ in range(200):
        if int(c.psql("SELECT num_done FROM pg_stat_checkpointer")) > done_before:
            break
        time.sleep(0.05)
    w1, b1 = ckpt_io(c)
    m = None
    for _ in range(100):
        m = last_complete_line(c.log, offset)
        if m:
            break
        time.sleep(0.05)
    if not m:
        sys.exit(f"no checkpoint complete line in {c.log}")
    row = dict(io=mode, scenario=scenario, variant=v, run=run, dirty=dirty, written=int(m.group(1)),
               write_s=float(m.group(2)), sync_s=float(m.group(3)), total_s=float(m.group(4)),
               sort_s=float(m.group(5)) if m.group(5) else None, wall_s=round(wall, 3),
               writes=w1 - w0, write_bytes=b1 - b0)
    writer.writerow(row)
    print(f"  {mode:8} {scenario:6} {v:15} run {run}: dirty={dirty} written={row['written']} "
          f"write={row['write_s']:.3f}s total={row['total_s']:.3f}s "
          f"sort={'-' if row['sort_s'] is None else '%.3f' % row['sort_s']} "
          f"writes={row['writes']} bytes/write={row['write_bytes'] // max(row['writes'], 1)}",
          flush=True)
    return row


def fio_bandwidth(directory):
    """The device's sequential direct-write bandwidth at 8 kB and 128 kB."""
    if not shutil.which("fio"):
        return {}
    res = {}
    for bs in ("8k", "128k"):
        r = subprocess.run(["fio", "--name=seqwrite", f"--directory={directory}", "--rw=write",
                            f"--bs={bs}", "--size=512M", "--direct=1", "--ioengine=psync",
                            "--iodepth=1", "--end_fsync=1", "--output-format=terse",
                            "--terse-version=3"], capture_output=True, text=True)
        try:
            # terse v3: field 48 is write bandwidth in KiB/s
            res[bs] = int(r.stdout.strip().split(";")[47]) / 1024.0
        except (IndexError, ValueError):
            pass
        for f in os.listdir(directory):
            if f.startswith("seqwrite"):
                os.unlink(os.path.join(directory, f))
    return res


def med(rows, key):
    return benchlib.median_of([r[key] for r in rows])


def main():
    if not SCENARIOS:
        print("immediate checkpoint: no scenario selected (BENCH_SCENARIOS), skipped")
        return
    os.makedirs(OUT, exist_ok=True)
    sb = MB + 256 + MB // 4
    clusters = {}
    for i, name in enumerate(sorted({variant_cluster(v) for v in VARIANTS})):
        clusters[name] = Cluster(name, PREFIX[name], BASE_PORT + i)
    print(f"immediate checkpoint, all buffers dirty: table {MB} MB ({ROWS} rows), "
          f"shared_buffers {sb} MB, {RUNS} runs, I/O {IO_MODES}, variants {VARIANTS}")
    print(f"machine: {os.cpu_count()} cores, {os.uname().release}; data under {OUT}")
    for c in clusters.values():
        c.init(sb)
        c.pg_ctl("start")
        c.psql("CREATE EXTENSION pg_buffercache")
        # one transaction: with wal_level = minimal the load skips WAL
        c.psql("BEGIN; CREATE TABLE bench (id int, n int, filler char(1000)) WITH (fillfactor = 50); "
               f"INSERT INTO bench SELECT g, 0, 'x' FROM generate_series(1, {ROWS}) g; COMMIT")
        c.psql("VACUUM (FREEZE) bench")
        c.psql("CHECKPOINT")
        c.pg_ctl("stop")

    csv_path = os.path.join(OUT, "immediate.csv")
    rows = []
    with open(csv_path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["io", "scenario", "variant", "run", "dirty", "written",
                                               "write_s", "sync_s", "total_s", "sort_s",
                                               "wall_s", "writes", "write_bytes"])
        writer.writeheader()
        for mode in IO_MODES:
            for c in clusters.values():
                c.set_io(mode)
                c.pg_ctl("start")
                c.psql("CREATE EXTENSION IF NOT EXISTS pg_prewarm; SELECT pg_prewarm('bench')")
                c.psql("CHECKPOINT")
            for scenario in SCENARIOS:
                for run in range(1, RUNS + 1):
                    for v in VARIANTS:
                        rows.append(one_run(clusters[variant_cluster(v)], v, mode, scenario,
                                            run, writer))
                        f.flush()
            for c in clusters.values():
                c.pg_ctl("stop")

    fio = fio_bandwidth(OUT) if "direct" in IO_MODES else {}

    print()
    print(f"medians of {RUNS} runs; ratios are variant/upstream of the medians; CSV: {csv_path}")
    hdr = (f"{'io':8} {'scen.':6} {'variant':15} {'dirty':>8} {'written':>8} {'write s':>8} {'total s':>8} "
           f"{'sort s':>7} {'writes':>8} {'B/write':>8} {'MB/s':>7} {'write x':>8} {'total x':>8} "
           f"{'writes x':>8}")
    print(hdr)
    print("-" * len(hdr))
    for mode, scenario in [(m, sc) for m in IO_MODES for sc in SCENARIOS]:
        sel = [r for r in rows if r["io"] == mode and r["scenario"] == scenario]
        base = [r for r in sel if r["variant"] == "upstream"]
        for v in VARIANTS:
            rs = [r for r in sel if r["variant"] == v]
            wr, tt, so = med(rs, "write_s"), med(rs, "total_s"), med(rs, "sort_s")
            n, b = med(rs, "writes"), med(rs, "write_bytes")
            mbps = b / 1048576 / tt if tt else 0
            def ratio(key):
                if not base or not med(base, key):
                    return "-"
                return "%.3f" % (med(rs, key) / med(base, key))
            print(f"{mode:8} {scenario:6} {v:15} {med(rs, 'dirty'):>8.0f} {med(rs, 'written'):>8.0f} "
                  f"{wr:>8.3f} {tt:>8.3f} {'-' if so is None else '%.3f' % so:>7} {n:>8.0f} "
                  f"{b / max(n, 1):>8.0f} {mbps:>7.0f} {ratio('write_s'):>8} {ratio('total_s'):>8} "
                  f"{ratio('writes'):>8}")
    print("MB/s = write_bytes / total time; 'x' columns = variant median / upstream median")
    if fio:
        print()
        print("device sequential write bandwidth (fio, direct, queue depth 1, same run): " +
              ", ".join(f"{bs}: {bw:.0f} MB/s" for bs, bw in fio.items()))


if __name__ == "__main__":
    main()
