"""Per-second samples beside a measured pgbench run of bench_volume.py
(BENCH_VOLUME_SAMPLE=1): what the kernel's page cache, the device and the
server's processes do second by second, to tell why tps stalls
(scripts/bench/volume_stalls.py analyses and plots them).

Sampler(c, mm, host, image) samples the running server of cluster c (a benchlib.Cluster)
and the device mm ("MAJ:MIN", or None; for a loop device host is the disk
that holds its image file, image) from its creation until stop(), which
returns the rows, one per second (the columns FIELDS):
- 5 times a second (wait columns; "name=n": on average n processes of the
  type per sample): the wait event (pg_stat_activity; "CPU" when active
  without one) of the pgbench client backends (be_wait), their kernel wait
  channel and state (/proc/PID/wchan and stat: "S:folio_wait_bit", "R";
  be_kern), both (be_both), and the same of the checkpointer (ckpt_*),
  the bgwriter (bgw_*) and the walwriter (walw_*);
- every second: /proc/meminfo Dirty and Writeback (kB, the whole machine),
  /proc/vmstat nr_dirtied and nr_written (MB/s), the device's writes
  (/sys/dev/block/MM/stat: MB/s, IOPS, flushes, requests in flight); for a
  loop device, the same of the disk that holds its image (host_*: the
  writes the loop device passes on, with the file system's own) and the
  MB of the image file that are allocated on that disk (img_alloc_mb: a
  sparse image grows where the volume first writes); the CPU time the
  hypervisor gave to others (steal_ms, /proc/stat, all CPUs) and the
  longest gap between two of the 5-a-second samples (tick_gap_ms: 200
  when nothing held the sampler up; more when the whole machine paused);
  per process type (be, bgw, ckpt, walw) the pg_stat_io deltas of object
  relation (writes, writebacks = blocks whose writeback was requested,
  fsyncs, write_bytes in MB, write/fsync/writeback ms with track_io_timing)
  and of object wal (writes, fsyncs, write_bytes, ms with
  track_wal_io_timing), and the MB the processes dirtied in the page cache
  (/proc/PID/io write_bytes; empty when the processes changed); the dirty
  and writeback MB in the page cache (cachestat(2), Linux >= 6.5; 0 before)
  of pgbench_accounts (cs_acc_*), its primary key (cs_pkey_*), the other
  relations of the database (cs_rel_*) and the WAL segments (cs_wal_*).
seconds_rows() adds the run's tps and longest latency per second (from the
pgbench -l logs) and its time t since pgbench started; checkpoint_rows()
gives the run's "checkpoint starting/complete" log lines.  The sampler
costs a psql session and some CPU: on a small machine, compare runs that
were all sampled.
"""

import collections
import ctypes
import os
import re
import subprocess
import time

import benchlib

TYPES = {"client backend": "be", "background writer": "bgw", "checkpointer": "ckpt",
         "walwriter": "walw"}
CATS = ("acc", "pkey", "rel", "wal")
IO_COLS = (("relation", ("writes", "writebacks", "fsyncs", "write_ms", "fsync_ms",
                         "write_bytes", "wb_ms")),
           ("wal", ("writes", "", "fsyncs", "write_ms", "fsync_ms", "write_bytes", "")))
WAIT_GROUPS = ("be_wait", "be_kern", "be_both", "ckpt_wait", "ckpt_kern", "bgw_wait",
               "bgw_kern", "walw_wait", "walw_kern")
FIELDS = (["ts", "dirty_kb", "writeback_kb", "dirtied_mb_s", "written_mb_s", "dev_w_mb_s",
           "dev_w_iops", "dev_flushes", "dev_inflight", "host_w_mb_s", "host_w_iops",
           "host_inflight", "img_alloc_mb", "steal_ms", "tick_gap_ms"] +
          [f"{t}_{'wal_' if obj == 'wal' else ''}{col}" for t in TYPES.values()
           for obj, cols in IO_COLS + (("", ("dirtied_mb",)),) for col in cols if col] +
          [f"cs_{k}_{s}_mb" for k in CATS for s in ("dirty", "wb")] + list(WAIT_GROUPS))
SECOND_FIELDS = ["run", "sb", "variant", "t", "tps", "lat_max_ms"] + FIELDS
CHECKPOINT_FIELDS = ["run", "sb", "variant", "t", "ts", "line"]

_NR_CACHESTAT = 451     # the same on every architecture of the unified syscall table
_libc = None


class _Range(ctypes.Structure):
    _fields_ = [("off", ctypes.c_uint64), ("len", ctypes.c_uint64)]


class _Stat(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in ("nr_cache", "nr_dirty", "nr_writeback",
                                                "nr_evicted", "nr_recently_evicted")]


def cachestat(path):
    """(dirty pages, writeback pages) of a file in the page cache, or None."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        r, s = _Range(0, 0), _Stat()
        if _libc.syscall(_NR_CACHESTAT, fd, ctypes.byref(r), ctypes.byref(s), 0) != 0:
            return None
        return s.nr_dirty, s.nr_writeback
    finally:
        os.close(fd)


def vmstat():
    res = {}
    with open("/proc/vmstat") as f:
        for line in f:
            k, v = line.split()
            if k in ("nr_dirtied", "nr_written"):
                res[k] = int(v)
    return res


def steal_ticks():
    """CPU steal time of all CPUs so far (/proc/stat, USER_HZ ticks)."""
    with open("/proc/stat") as f:
        return int(f.readline().split()[8])


def devstat(mm):
    """Writes completed, sectors written, requests in flight and flushes of
    device mm so far (/sys/dev/block/MM/stat), or None."""
    if not mm:
        return None
    try:
        with open(f"/sys/dev/block/{mm}/stat") as f:
            p = [int(x) for x in f.read().split()]
    except OSError:
        return None
    return dict(w_ios=p[4], w_sect=p[6], inflight=p[8], flush=p[15] if len(p) > 15 else 0)


def proc_write_bytes(pid):
    """Bytes process pid has dirtied in the page cache so far, or None."""
    try:
        with open(f"/proc/{pid}/io") as f:
            for line in f:
                if line.startswith("write_bytes:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def wchan(pid):
    """"R" (running) or "STATE:kernel wait channel" of process pid."""
    try:
        with open(f"/proc/{pid}/wchan") as f:
            w = f.read().strip()
        with open(f"/proc/{pid}/stat") as f:
            st = f.read()
        state = st[st.rindex(")") + 2]
    except OSError:
        return "?"
    return "R" if state == "R" else f"{state}:{w or '-'}"


class Session:
    """A psql session of cluster c; query() returns the output lines."""

    def __init__(self, c):
        self.p = c.session("-h", "localhost", "-p", str(c.port), "-d", "postgres",
                           appname="volume_sampler", stderr=subprocess.DEVNULL)
        self.n = 0

    def query(self, sql):
        self.n += 1
        mark = f"__volume_sampler_{self.n}__"
        self.p.stdin.write(sql.rstrip().rstrip(";") + ";\n\\echo " + mark + "\n")
        self.p.stdin.flush()
        out = []
        for line in self.p.stdout:
            line = line.rstrip("\n")
            if line == mark:
                return out
            if line:
                out.append(line)
        raise RuntimeError("psql ended")

    def close(self):
        self.p.stdin.close()
        benchlib.reap(self.p, 5)


IO_SQL = ("SELECT backend_type, object, coalesce(sum(writes),0), coalesce(sum(writebacks),0), "
          "coalesce(sum(fsyncs),0), coalesce(sum(write_time),0), coalesce(sum(fsync_time),0), "
          "coalesce(sum(write_bytes),0), coalesce(sum(writeback_time),0) FROM pg_stat_io "
          "WHERE object IN ('relation','wal') AND backend_type IN "
          "('client backend','background writer','checkpointer','walwriter') GROUP BY 1, 2")
ACT_SQL = ("SELECT pid, backend_type, coalesce(application_name,''), coalesce(state,''), "
           "coalesce(wait_event_type,''), coalesce(wait_event,'') FROM pg_stat_activity "
           "WHERE pid <> pg_backend_pid() AND backend_type IN "
           "('client backend','background writer','checkpointer','walwriter')")


class Sampler(benchlib.Sampler):
    def __init__(self, c, mm, host=None, image=None, tick=0.2):
        self.c, self.mm, self.tick = c, mm, tick
        self.host, self.image = host, image
        self.files, self.err = None, None
        super().__init__()

    def stop(self):
        rows = super().stop()
        if self.err:
            print(f"  volume sampler failed: {self.err}", flush=True)
        return rows

    def _files(self, s):
        """{path: category} of the relation files of the database."""
        db = s.query("SELECT oid FROM pg_database WHERE datname = current_database()")[0]
        rel = {}
        for line in s.query("SELECT relname, pg_relation_filenode(oid) FROM pg_class "
                            "WHERE relkind IN ('r','i','t','m') AND "
                            "pg_relation_filenode(oid) IS NOT NULL"):
            name, node = line.split("|")
            rel[node] = ("acc" if name == "pgbench_accounts" else
                         "pkey" if name == "pgbench_accounts_pkey" else "rel")
        files = {}
        base = os.path.join(self.c.data, "base", db)
        for fn in os.listdir(base):
            node = re.match(r"(\d+)", fn)
            if node:
                files[os.path.join(base, fn)] = rel.get(node.group(1), "rel")
        return files

    def _wal_files(self):
        d = os.path.join(self.c.data, "pg_wal")
        return [os.path.join(d, f) for f in os.listdir(d) if re.fullmatch(r"[0-9A-F]{24}", f)]

    def _slow(self, s, pids):
        """The once-a-second counters."""
        snap = dict(ts=time.time(), mem=benchlib.meminfo_kb("Dirty", "Writeback"), vm=vmstat(),
                    dev=devstat(self.mm), host=devstat(self.host), steal=steal_ticks())
        if self.image:
            try:
                snap["img"] = os.stat(self.image).st_blocks * 512
            except OSError:
                pass
        io = {}
        for line in s.query(IO_SQL):
            bt, obj, *v = line.split("|")
            io[(TYPES[bt], obj)] = [float(x) for x in v]
        snap["io"] = io
        pw = collections.Counter()
        for pid, t in pids.items():
            b = proc_write_bytes(pid)
            if b is not None:
                pw[t] += b
        snap["pw"], snap["pids"] = pw, dict(pids)
        cs = collections.Counter()
        for path, cat in list(self.files.items()) + [(p, "wal") for p in self._wal_files()]:
            r = cachestat(path)
            if r:
                cs[cat + "_dirty"] += r[0]
                cs[cat + "_wb"] += r[1]
        snap["cs"] = cs
        return snap

    def loop(self):
        try:
            s = Session(self.c)
            self.files = self._files(s)
            prev, waits, n_act, next_slow = None, collections.Counter(), 0, time.time()
            last, gap = time.monotonic(), 0.0
            while not self.stop_ev.is_set():
                t = time.time()
                gap, last = max(gap, time.monotonic() - last), time.monotonic()
                pids = {}
                for line in s.query(ACT_SQL):
                    pid, bt, app, state, wt, we = line.split("|")
                    t_ = TYPES[bt]
                    if t_ == "be" and app != "pgbench":
                        continue
                    pid = int(pid)
                    pids[pid] = t_
                    w = f"{wt}:{we}" if wt else ("CPU" if state == "active" else state or "-")
                    k = wchan(pid)
                    waits[f"{t_}_wait {w}"] += 1
                    waits[f"{t_}_kern {k}"] += 1
                    if t_ == "be":
                        waits[f"be_both {w}@{k}"] += 1
                n_act += 1
                if t >= next_slow:
                    cur = self._slow(s, pids)
                    cur["waits"], cur["nsamp"], cur["gap"] = waits, n_act, gap
                    if prev is not None:
                        self.samples.append(row(prev, cur))
                    prev, waits, n_act, gap = cur, collections.Counter(), 0, 0.0
                    next_slow += 1.0
                self.stop_ev.wait(max(0.0, self.tick - (time.time() - t)))
            s.close()
        except Exception as e:  # the benchmark goes on without samples
            self.err = repr(e)


def row(a, b):
    """The row of the second from snapshot a to snapshot b."""
    dt = b["ts"] - a["ts"]
    r = dict(ts=round(b["ts"], 3), dirty_kb=b["mem"].get("Dirty", ""),
             writeback_kb=b["mem"].get("Writeback", ""),
             dirtied_mb_s=round((b["vm"]["nr_dirtied"] - a["vm"]["nr_dirtied"]) * 4096 /
                                1e6 / dt, 1),
             written_mb_s=round((b["vm"]["nr_written"] - a["vm"]["nr_written"]) * 4096 /
                                1e6 / dt, 1))
    if a["dev"] and b["dev"]:
        r["dev_w_mb_s"] = round((b["dev"]["w_sect"] - a["dev"]["w_sect"]) * 512 / 1e6 / dt, 1)
        r["dev_w_iops"] = round((b["dev"]["w_ios"] - a["dev"]["w_ios"]) / dt)
        r["dev_flushes"] = b["dev"]["flush"] - a["dev"]["flush"]
        r["dev_inflight"] = b["dev"]["inflight"]
    if a["host"] and b["host"]:
        r["host_w_mb_s"] = round((b["host"]["w_sect"] - a["host"]["w_sect"]) * 512 / 1e6 / dt, 1)
        r["host_w_iops"] = round((b["host"]["w_ios"] - a["host"]["w_ios"]) / dt)
        r["host_inflight"] = b["host"]["inflight"]
    if "img" in b:
        r["img_alloc_mb"] = round(b["img"] / 1e6, 1)
    r["steal_ms"] = round((b["steal"] - a["steal"]) * 1000 / os.sysconf("SC_CLK_TCK") / dt)
    r["tick_gap_ms"] = round(b["gap"] * 1000)
    for t in TYPES.values():
        for obj, cols in IO_COLS:
            va, vb = a["io"].get((t, obj)), b["io"].get((t, obj))
            for i, col in enumerate(cols):
                if not col:
                    continue
                name = f"{t}_{'wal_' if obj == 'wal' else ''}{col}"
                if va is None or vb is None:
                    r[name] = ""
                else:
                    d = vb[i] - va[i]
                    r[name] = round(d / 1e6, 2) if col == "write_bytes" else round(d)
        same = ({p for p, x in a["pids"].items() if x == t} ==
                {p for p, x in b["pids"].items() if x == t})
        r[f"{t}_dirtied_mb"] = round((b["pw"][t] - a["pw"][t]) / 1e6, 2) if same else ""
    for k in CATS:
        r[f"cs_{k}_dirty_mb"] = round(b["cs"][k + "_dirty"] * 4096 / 1e6, 1)
        r[f"cs_{k}_wb_mb"] = round(b["cs"][k + "_wb"] * 4096 / 1e6, 1)
    n = max(1, b["nsamp"])
    for grp in WAIT_GROUPS:
        items = sorted(((k.split(" ", 1)[1], v / n) for k, v in b["waits"].items()
                        if k.startswith(grp + " ")), key=lambda x: -x[1])
        r[grp] = ";".join(f"{k}={v:.1f}" for k, v in items if v >= 0.05)
    return r


def seconds_rows(samples, logdir, t0, **ids):
    """The rows of SECOND_FIELDS: the samples with 'ids' (run, sb, variant),
    t = seconds since t0 (pgbench's start), and the tps and longest latency
    of the transactions (pgbench -l logs in logdir) that ended in the
    sample's second."""
    txs = benchlib.tx_ends(logdir)
    res, prev = [], None
    for r in samples:
        a = prev if prev is not None else r["ts"] - 1.0
        prev = r["ts"]
        tps, lat = benchlib.tx_in(txs, a, r["ts"])
        res.append(dict(r, **ids, t=round(r["ts"] - t0, 1), tps=round(tps, 1),
                        lat_max_ms=round(lat, 1)))
    return res


def checkpoint_rows(logfile, offset, t0, **ids):
    """The rows of CHECKPOINT_FIELDS: the "checkpoint starting" and
    "checkpoint complete" lines of the server log after byte 'offset', their
    time t since t0 and epoch ts, with 'ids'."""
    res = []
    for line in benchlib.log_lines(logfile, offset):
        m = benchlib.START.match(line) or benchlib.DONE.match(line)
        if m:
            ts = benchlib.parse_ts(m.group(1))
            res.append(dict(ids, t=round(ts - t0, 1), ts=round(ts, 3),
                            line=line[line.index("checkpoint "):]))
    return res
