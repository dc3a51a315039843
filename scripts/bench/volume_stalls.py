#!/usr/bin/python3
"""Why pgbench stalls on the throttled volume: the samples of
`BENCH_VOLUME_SAMPLE=1 make bench-volume` (scripts/bench/bench_volume.py,
scripts/bench/volume_sampler.py) run by run.

usage: volume_stalls.py [--variant V]... [--excerpts N] [--per S]
                        [--plot [--png FILE.png]] SAMPLES

SAMPLES is a volume-<date>-sample-seconds.csv (or .csv.gz, as in
bench-results/), or a directory holding one; the checkpoint lines are read
from the file of the same name with "checkpoints" for "seconds" (gzipped or
not).  Per run (of the variants named with --variant, default all): mean
and median tps, stall seconds (tps below 1/10 of the run's median, as
bench_volume.py counts them), longest latency; what pg_stat_io says each
process type wrote per S seconds (--per, default 45: checkpoint_timeout),
and for what share of those blocks it requested writeback
(sync_file_range: the *_flush_after settings); the checkpoints (start,
write and sync times, sync files); per checkpoint cycle the writes and
writebacks per process type, WAL MB, the largest Dirty and Writeback, stall
seconds; the stall episodes, the first N (--excerpts, default 3) second by
second (ph: W write phase, w between write and sync, S sync phase; tps,
longest latency, Dirty and Writeback MB (machine), dirty and writeback MB
of pgbench_accounts (accD, accWb), its pkey (pkD), WAL (walD, walWb), the
device's MB/s and IOPS, writes of backends, bgwriter, checkpointer,
writebacks, WAL fsyncs and fsync ms; then the backends' wait events, the
checkpointer's and the backends' kernel wait channels).  At the end every
run's stall seconds by cause: "sync" = in a checkpoint's sync phase or the
second after it, "flush" = else, when the kernel had >= 20 MB of relation
files under writeback in that second or the 2 before (its flusher writing
out what was dirtied 30 s ago, dirty_expire_centisecs), "other"; with the
dirty MB of pgbench_accounts just before each flush stall.  (With the
defaults, the output is that of the *-analysis.txt files in bench-results/
plus the "written per" lines.)
--plot draws a PNG (--png FILE.png; default: the SAMPLES file's name with
"tps-dirty.png" for "seconds.csv[.gz]", next to it; gnuplot): a panel per
run, tps per second (left axis) beside Dirty (machine; cut off above the
relation files' peak) and the relation files' dirty and writeback MB (right
axis), checkpoint write phases grey, sync phases red.
"""

import argparse
import csv
import glob
import os
import re
import statistics
import sys
import tempfile

import benchlib

STALL = 0.1     # as bench_volume.py: a second below this share of the run's median tps
TYPES = (("be", "backends"), ("bgw", "bgwriter"), ("ckpt", "checkpointer"))


def f(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return 0.0


def sample_file(path):
    """SAMPLES: the file, or the one *-seconds.csv[.gz] with samples in a directory."""
    if not os.path.isdir(path):
        return path
    found = []
    for p in sorted(glob.glob(os.path.join(path, "*seconds.csv*"))):
        with benchlib.open_text(p) as fh:
            if "dirty_kb" in next(csv.reader(fh), []):
                found.append(p)
    if len(found) != 1:
        sys.exit(f"{path}: {len(found)} per-second sample files (*seconds.csv with a dirty_kb "
                 f"column) in it; name one")
    return found[0]


def read(path):
    """(per-second rows, checkpoint rows), as strings."""
    head, tail = os.path.split(path)
    ckpath = os.path.join(head, tail.replace("seconds", "checkpoints"))
    if ckpath != path and not os.path.exists(ckpath):
        # one of the two gzipped, the other not
        ckpath = ckpath[:-3] if ckpath.endswith(".gz") else ckpath + ".gz"
    if ckpath == path or not os.path.exists(ckpath):
        sys.exit(f"{path}: no checkpoint file (its name with \"checkpoints\" for "
                 f"\"seconds\", .gz or not) beside it")
    with benchlib.open_text(path) as fh:
        secs = list(csv.DictReader(fh))
    with benchlib.open_text(ckpath) as fh:
        cks = list(csv.DictReader(fh))
    return secs, cks


def key(r):
    """A run: (shared_buffers, variant, run); CSVs before the sb column: ""."""
    return r.get("sb") or "", r["variant"], r["run"]


def ckpts_of(cks, k):
    res, cur = [], None
    for r in cks:
        if key(r) != k:
            continue
        t, line = float(r["t"]), r["line"]
        if line.startswith("checkpoint starting"):
            cur = dict(start=t, kind=line.split(": ", 1)[1])
        elif cur:
            m = re.search(r"wrote (\d+) buffers.*write=([\d.]+) s, sync=([\d.]+) s, "
                          r"total=([\d.]+) s; sync files=(\d+), longest=([\d.]+) s, "
                          r"average=([\d.]+) s; distance=(\d+) kB", line)
            if m:
                cur.update(end=t, buffers=int(m.group(1)), write=float(m.group(2)),
                           sync=float(m.group(3)), total=float(m.group(4)),
                           files=int(m.group(5)), longest=float(m.group(6)),
                           dist_mb=int(m.group(8)) / 1024)
                cur["write_end"] = cur["start"] + cur["write"]
                cur["sync_start"] = cur["end"] - cur["sync"]
                res.append(cur)
            cur = None
    if cur:
        res.append(dict(cur, end=None))
    return res


def phase(t, ck):
    for k in ck:
        if k.get("end") is None:
            if t >= k["start"]:
                return "W"
            continue
        if k["start"] <= t - 0.5 < k["write_end"]:
            return "W"
        if k["write_end"] <= t - 0.5 < k["end"]:
            return "S" if t - 0.5 >= k["sync_start"] else "w"   # w: between write and sync
    return "."


COLS = [("t", "t", 0), ("ph", None, 0), ("tps", "tps", 1), ("maxlat", "lat_max_ms", 1),
        ("DirtyMB", "dirty_kb", 1 / 1024), ("WbMB", "writeback_kb", 1 / 1024),
        ("accD", "cs_acc_dirty_mb", 1), ("accWb", "cs_acc_wb_mb", 1),
        ("pkD", "cs_pkey_dirty_mb", 1), ("walD", "cs_wal_dirty_mb", 1),
        ("walWb", "cs_wal_wb_mb", 1), ("devMB", "dev_w_mb_s", 1), ("IOPS", "dev_w_iops", 1),
        ("beW", "be_writes", 1), ("bgW", "bgw_writes", 1), ("ckW", "ckpt_writes", 1),
        ("ckWb", "ckpt_writebacks", 1), ("bgWb", "bgw_writebacks", 1),
        ("walFs", "be_wal_fsyncs", 1), ("wwFs", "walw_wal_fsyncs", 1),
        ("walFsMs", "be_wal_fsync_ms", 1)]
MB_COLS = ("accD", "accWb", "pkD", "walD", "walWb")


def excerpt(rows, ck, i0, i1):
    out = ["  " + " ".join(f"{c[0]:>7}" for c in COLS) + "  backend waits | ckpt kernel"]
    for r in rows[max(0, i0):i1]:
        vals = []
        for name, col, mul in COLS:
            if col is None:
                vals.append(f"{phase(f(r['t']), ck):>7}")
            elif name == "t":
                vals.append(f"{f(r['t']):7.0f}")
            elif name in MB_COLS:
                vals.append(f"{f(r[col]):7.1f}")
            else:
                vals.append(f"{f(r[col]) * mul:7.0f}")
        out.append("  " + " ".join(vals) + "  " + r["be_wait"][:110] + " | " +
                   r["ckpt_kern"][:40] + " | " + r["be_kern"][:90])
    return "\n".join(out)


def title(k):
    sb, v, run = k
    return f"{v} run {run}" + (f", shared_buffers {sb}" if sb else "")


def written(rows, per):
    """What each process type wrote (pg_stat_io) per 'per' seconds, and the
    share of those blocks whose writeback it requested."""
    parts = []
    for t, name in TYPES:
        mb = sum(f(r[f"{t}_write_bytes"]) for r in rows)
        wb = sum(f(r[f"{t}_writebacks"]) for r in rows)
        share = f"{100 * wb * 8192 / (mb * 1e6):.0f}%" if mb else "-"
        parts.append(f"{name} {mb / len(rows) * per:.0f} MB (writeback requested: {share})")
    return f"  written per {per:g} s (pg_stat_io): " + ", ".join(parts)


def report(k, rows, ck, excerpts, per):
    tps = [f(r["tps"]) for r in rows]
    med = statistics.median(tps)
    stalls = [i for i, x in enumerate(tps) if x < STALL * med]
    print(f"\n===== {title(k)}: mean tps {statistics.mean(tps):.0f}, median {med:.0f}, "
          f"stall seconds {len(stalls)}, max latency "
          f"{max(f(r['lat_max_ms']) for r in rows):.0f} ms")
    print(written(rows, per))
    print("  checkpoints (t from pgbench start): start kind | write s, sync s (sync "
          "start..end), files, longest s, distance MB, buffers")
    for c in ck:
        if c.get("end") is None:
            print(f"   {c['start']:6.1f} {c['kind']:<10} (running at the end)")
            continue
        print(f"   {c['start']:6.1f} {c['kind']:<10} | write {c['write']:5.1f}, sync "
              f"{c['sync']:5.2f} ({c['sync_start']:6.1f}..{c['end']:6.1f}), files "
              f"{c['files']:3d}, longest {c['longest']:5.2f}, dist {c['dist_mb']:5.0f}, "
              f"bufs {c['buffers']}")
    print("  per cycle [start, next start): writes/writebacks by type (8kB blocks), WAL "
          "MB, max Dirty/Writeback MB, stall s")
    bounds = [c["start"] for c in ck] + [1e9]
    for a, b in zip(bounds, bounds[1:]):
        rs = [r for r in rows if a <= f(r["t"]) - 0.5 < b]
        if not rs:
            continue

        def s(col):
            return sum(f(r[col]) for r in rs)
        st = sum(1 for r in rs if f(r["tps"]) < STALL * med)
        print(f"   {a:6.1f}-{min(b, f(rows[-1]['t'])):6.1f}: be w {s('be_writes'):6.0f} "
              f"wb {s('be_writebacks'):5.0f} | bgw w {s('bgw_writes'):6.0f} wb "
              f"{s('bgw_writebacks'):5.0f} | ckpt w {s('ckpt_writes'):6.0f} wb "
              f"{s('ckpt_writebacks'):5.0f} fsync {s('ckpt_fsyncs'):4.0f} | WAL "
              f"{s('be_wal_write_bytes') + s('walw_wal_write_bytes'):5.0f} MB | "
              f"maxDirty {max(f(r['dirty_kb']) for r in rs) / 1024:5.0f} maxWb "
              f"{max(f(r['writeback_kb']) for r in rs) / 1024:5.0f} | stall {st}")
    eps = []
    for i in stalls:
        if eps and i - eps[-1][1] <= 2:
            eps[-1][1] = i
        else:
            eps.append([i, i])
    print("  stall episodes (t): " + ", ".join(
        f"{f(rows[a]['t']):.0f}-{f(rows[b]['t']):.0f}" for a, b in eps))
    for a, b in eps[:excerpts]:
        print(f"  --- stall {f(rows[a]['t']):.0f}-{f(rows[b]['t']):.0f}")
        print(excerpt(rows, ck, a - 8, b + 3))


def classify(k, rows, ck):
    """The run's stall seconds by cause (sync, flush, other) and the dirty MB
    of pgbench_accounts just before each flush stall."""
    med = statistics.median(f(r["tps"]) for r in rows)
    c = {"sync": 0, "flush": 0, "other": 0}
    pre = []
    for i, r in enumerate(rows):
        if f(r["tps"]) >= STALL * med:
            continue
        t = f(r["t"])
        if any(x.get("end") and x["sync_start"] - 0.5 <= t - 0.5 <= x["end"] + 1.0 for x in ck):
            c["sync"] += 1
        elif any(f(x["cs_acc_wb_mb"]) + f(x["cs_pkey_wb_mb"]) + f(x["cs_rel_wb_mb"]) >= 20
                 for x in rows[max(0, i - 2):i + 1]):
            c["flush"] += 1
            if i >= 1 and f(rows[i - 1]["tps"]) >= STALL * med:
                j = max(0, i - 3)
                pre.append(max(f(x["cs_acc_dirty_mb"]) for x in rows[j:i + 1]))
        else:
            c["other"] += 1
    sb, v, run = k
    print(f"  {v + (' ' + sb if sb else ''):<50} run {run}: {c}  pre-flush acc dirty MB: "
          f"{[round(x) for x in pre]}")


def dips(k, rows):
    """The run's device dips (seconds in which the volume wrote less than a
    tenth of its median IOPS) and slow seconds (a transaction of 500 ms or
    more), each with what the disk below the loop device did and how much
    the image grew (sampled runs with host_* columns only), and, where
    sampled, the CPU steal and the sampler's longest tick gap of the second
    (a machine that pauses delays every process, the sampler too)."""
    iops = [f(r["dev_w_iops"]) for r in rows]
    med = statistics.median(iops) if iops else 0
    alloc = [f(r.get("img_alloc_mb")) for r in rows]
    grew = [0.0] + [max(0.0, b - a) for a, b in zip(alloc, alloc[1:])]
    sel = [i for i, r in enumerate(rows)
           if iops[i] < STALL * med or f(r["lat_max_ms"]) >= 500]
    sb, v, run = k
    print(f"  {v + (' ' + sb if sb else ''):<50} run {run}: image grew "
          f"{sum(grew):.0f} MB in {sum(1 for g in grew if g > 0)} s; dips "
          f"{sum(1 for x in iops if x < STALL * med)}, slow seconds "
          f"{sum(1 for r in rows if f(r['lat_max_ms']) >= 500)}" +
          (f"; steal {sum(f(r['steal_ms']) for r in rows) / 1000:.1f} s, seconds with a tick "
           f"gap >= 400 ms {sum(1 for r in rows if f(r['tick_gap_ms']) >= 400)}"
           if "tick_gap_ms" in rows[0] else ""))
    for i in sel:
        r = rows[i]
        near = sum(grew[max(0, i - 2):i + 1])
        print(f"    t {f(r['t']):5.0f} tps {f(r['tps']):6.0f} lat {f(r['lat_max_ms']):6.0f} | "
              f"volume {iops[i]:5.0f} IOPS, in flight {r['dev_inflight']:>3} | disk below "
              f"{r.get('host_w_iops', ''):>5} IOPS, in flight {r.get('host_inflight', ''):>3} "
              f"| image grew {near:5.1f} MB (this s and 2 before) | ckpt {r['ckpt_kern']} | "
              f"bgw {r['bgw_kern']}" +
              (f" | steal {f(r['steal_ms']):4.0f} ms, tick gap {f(r['tick_gap_ms']):4.0f} ms"
               if "tick_gap_ms" in r else ""))


def checkpoint_shades(cks, xmax):
    """gnuplot lines that shade the checkpoints 'cks' of a panel: the write
    phase grey (to xmax when it had not ended), the sync phase red."""
    lines = ["unset object"]
    for i, c in enumerate(cks):
        end = c.get("end")
        parts = [(c["start"], c["write_end"] if end else xmax, "#e0e0e0")]
        if end:
            parts.append((c["sync_start"], end, "#f4b0b0"))
        for j, (a, b, color) in enumerate(parts):
            lines.append(f"set object {2 * i + j + 1} rect from first {a}, graph 0 "
                         f"to first {b}, graph 1 behind fc rgb '{color}' fs solid 1.0 noborder")
    return lines


def plot(png, runs, secs_of, ck_of):
    if not benchlib.have_gnuplot():
        return
    rel = ("acc", "pkey", "rel")
    top = max(f(r["tps"]) for k in runs for r in secs_of[k]) * 1.1 or 1
    # the right axis fits the relation files (the machine's Dirty may be cut off)
    top2 = max(max(sum(f(r[f"cs_{c}_dirty_mb"]) for c in rel),
                   sum(f(r[f"cs_{c}_wb_mb"]) for c in rel))
               for k in runs for r in secs_of[k]) * 1.1 or 100
    xmax = max(f(r["t"]) for k in runs for r in secs_of[k])
    script = benchlib.multiplot_head(
        png, 260 * len(runs) + 60, len(runs),
        "pgbench tps per second (left) and page cache MB (right); grey: checkpoint write "
        "phase, red: sync phase")
    script += ["set ylabel 'tps'", "set y2label 'MB'", "set ytics nomirror", "set y2tics",
               "set xlabel 's since pgbench start'", "set key top right horizontal",
               f"set yrange [0:{top:.0f}]", f"set y2range [0:{top2:.0f}]",
               f"set xrange [0:{xmax:.0f}]"]
    with tempfile.TemporaryDirectory() as tmp:
        for n, k in enumerate(runs):
            rows = secs_of[k]
            dat = os.path.join(tmp, f"run{n}.dat")
            benchlib.write_dat(dat, [dict(t=f(r["t"]), tps=f(r["tps"]),
                                          dirty=round(f(r["dirty_kb"]) / 1024, 1),
                                          reld=round(sum(f(r[f"cs_{c}_dirty_mb"])
                                                         for c in rel), 1),
                                          relwb=round(sum(f(r[f"cs_{c}_wb_mb"])
                                                          for c in rel), 1))
                                     for r in rows], ("t", "tps", "dirty", "reld", "relwb"))
            script += checkpoint_shades(ck_of[k], xmax)
            tps = [f(r["tps"]) for r in rows]
            med = statistics.median(tps)
            script.append(f"set title '{title(k)}: mean tps {statistics.mean(tps):.0f}, stall s "
                          f"{sum(1 for x in tps if x < STALL * med)}, max latency "
                          f"{max(f(r['lat_max_ms']) for r in rows):.0f} ms'")
            ts = ["tps", "Dirty MB (/proc/meminfo, machine)",
                  "relation files dirty MB (cachestat)",
                  "relation files writeback MB (cachestat)"]
            ts = [f"title '{x}'" if n == 0 else "notitle" for x in ts]
            script.append(
                f"plot '{dat}' using 1:2 axes x1y1 with lines lw 1 lc rgb 'blue' {ts[0]}, "
                f"'' using 1:3 axes x1y2 with lines dt 3 lc rgb 'gray50' {ts[1]}, "
                f"'' using 1:4 axes x1y2 with lines lw 1 lc rgb 'dark-orange' {ts[2]}, "
                f"'' using 1:5 axes x1y2 with lines lw 1 lc rgb 'dark-green' {ts[3]}")
        benchlib.gnuplot(script, png)


# The backends' wait events, grouped for the breakdown (first match wins):
# (group, prefixes of "Type:Event" or state).  Not waiting: "CPU".
WAIT_CLASSES = (("WAL flush", ("LWLock:WALWrite", "IO:WalSync", "IO:WalWrite")),
                ("row and transaction locks", ("Lock:",)),
                ("data file I/O", ("IO:DataFile", "IO:BufferFileWrite", "IO:BufFile")),
                ("buffer locks and I/O", ("LWLock:Buffer", "IO:Buffer", "IO:AioIo", "BufferPin")),
                ("client (pgbench)", ("Client:", "idle")),
                ("CPU", ("CPU",)))
WAIT_OTHER = "other waits"


def wait_groups(text):
    """A be_wait column ("Client:ClientRead=2.0;CPU=0.4") as mean backends per
    WAIT_CLASSES group."""
    out = dict.fromkeys([g for g, _ in WAIT_CLASSES] + [WAIT_OTHER], 0.0)
    for item in (text or "").split(";"):
        if "=" not in item:
            continue
        name, n = item.rsplit("=", 1)
        group = next((g for g, pre in WAIT_CLASSES if name.startswith(pre)), WAIT_OTHER)
        out[group] += f(n)
    return out


def io_split(r):
    """The device's writes in second r: (WAL flush requests, WAL writes, data
    files = the rest).  An fdatasync() of WAL issues a write and, on a device
    with a volatile write cache, an empty flush request that counts against
    the IOPS limit like a write; before dev_flushes was sampled (0 in every
    second) the WAL fsyncs of pg_stat_io stand for the flush requests."""
    wal = sum(f(r.get(f"{p}_wal_writes")) for p in ("be", "bgw", "ckpt", "walw"))
    fsyncs = sum(f(r.get(f"{p}_wal_fsyncs")) for p in ("be", "bgw", "ckpt", "walw"))
    flushes = f(r.get("dev_flushes")) if r.get("_flushes_sampled") else fsyncs
    return flushes, wal, max(0.0, f(r["dev_w_iops"]) - flushes - wal)


FLUSHES = "auto"     # --flushes: "sampled", "wal-fsyncs" or "auto"


def mark_flushes(rows):
    """Whether the run's dev_flushes count (see io_split): "auto" takes them
    when any second has one; a run on a device without a write cache
    (BENCH_VOLUME_WRITE_CACHE=off) has none and needs --flushes sampled."""
    sampled = (FLUSHES == "sampled" or
               (FLUSHES == "auto" and any(f(r.get("dev_flushes")) for r in rows)))
    for r in rows:
        r["_flushes_sampled"] = sampled


def breakdown(runs, secs_of):
    """Per run, the mean over its seconds of the backends' wait groups and of
    the device's writes by kind, in the seconds pgbench ran (tps >= STALL x
    the median) and in the stalled ones."""
    groups = [g for g, _ in WAIT_CLASSES] + [WAIT_OTHER]
    print("\nwhere the time goes: backends waiting per group (mean of the 8 clients' samples) "
          "and device writes/s by kind, seconds running / stalled")
    print(f"{'run':45} {'secs':>5} {'tps':>6} " +
          " ".join(f"{g[:12]:>12}" for g in groups) +
          f" {'dev w/s':>7} {'WAL flush':>9} {'WAL write':>9} {'data':>6} {'tx/dev w':>8}")
    for k in runs:
        rows = secs_of[k]
        mark_flushes(rows)
        med = statistics.median(f(r["tps"]) for r in rows)
        for what, sel in (("running", [r for r in rows if f(r["tps"]) >= STALL * med]),
                          ("stalled", [r for r in rows if f(r["tps"]) < STALL * med])):
            if not sel:
                continue
            w = [wait_groups(r["be_wait"]) for r in sel]
            io = [io_split(r) for r in sel]
            dev = sum(f(r["dev_w_iops"]) for r in sel)
            print(f"{title(k) + ', ' + what:45} {len(sel):5d} "
                  f"{statistics.mean(f(r['tps']) for r in sel):6.0f} " +
                  " ".join(f"{statistics.mean(x[g] for x in w):12.2f}" for g in groups) +
                  f" {dev / len(sel):7.0f} " +
                  " ".join(f"{statistics.mean(x[i] for x in io):9.0f}" for i in (0, 1)) +
                  f" {statistics.mean(x[2] for x in io):6.0f}"
                  f" {sum(f(r['tps']) for r in sel) / dev if dev else 0:8.3f}")
    if not any(f(r.get("be_wal_fsync_ms")) for k in runs for r in secs_of[k]):
        return
    print("\nthe backends' I/O time (pg_stat_io with track_io_timing and track_wal_io_timing), "
          "ms per second of the 8 backends' 8000, and the mean WAL flush (fsync) time")
    cols = (("data write", "be_write_ms"), ("writeback", "be_wb_ms"),
            ("WAL write", "be_wal_write_ms"), ("WAL fsync", "be_wal_fsync_ms"))
    print(f"{'run':45} " + " ".join(f"{c:>10}" for c, _ in cols) + f" {'ms/flush':>8}")
    for k in runs:
        rows = secs_of[k]
        med = statistics.median(f(r["tps"]) for r in rows)
        for what, sel in (("running", [r for r in rows if f(r["tps"]) >= STALL * med]),
                          ("stalled", [r for r in rows if f(r["tps"]) < STALL * med])):
            if not sel:
                continue
            fs = sum(f(r.get("be_wal_fsyncs")) for r in sel)
            print(f"{title(k) + ', ' + what:45} " +
                  " ".join(f"{statistics.mean(f(r.get(c)) for r in sel):10.0f}" for _, c in cols) +
                  f" {sum(f(r.get('be_wal_fsync_ms')) for r in sel) / fs if fs else 0:8.2f}")


def plot_breakdown(png, runs, secs_of, ck_of):
    """Per run three panels: tps; the device's writes per second by kind
    (io_split), stacked, under its IOPS; the backends' wait groups, stacked."""
    if not benchlib.have_gnuplot():
        return
    groups = [g for g, _ in WAIT_CLASSES] + [WAIT_OTHER]
    colors = ("#d62728", "#ff7f0e", "#8c564b", "#9467bd", "#bbbbbb", "#2ca02c", "#17becf")
    io_colors = ("#1f77b4", "#aec7e8", "#ff9896")
    top = max(f(r["tps"]) for k in runs for r in secs_of[k]) * 1.1 or 1
    itop = max(f(r["dev_w_iops"]) for k in runs for r in secs_of[k]) * 1.15 or 1
    xmax = max(f(r["t"]) for k in runs for r in secs_of[k])
    script = benchlib.multiplot_head(
        png, 3 * 200 * len(runs) + 60, 3 * len(runs),
        "per second: tps; writes of the volume by kind (stacked); what the 8 pgbench backends "
        "wait on (stacked, sampled 5 times a second); grey: checkpoint write phase, red: sync")
    script += ["set xlabel 's since pgbench start'", "set key outside right vertical",
               f"set xrange [0:{xmax:.0f}]", "set style fill solid 1.0 noborder",
               "set lmargin 10", "set rmargin 34"]
    with tempfile.TemporaryDirectory() as tmp:
        for n, k in enumerate(runs):
            rows = secs_of[k]
            mark_flushes(rows)
            dat = os.path.join(tmp, f"run{n}.dat")
            keys = ["t", "tps", "fl", "fw", "fd"] + [f"g{i}" for i in range(len(groups))]
            out = []
            for r in rows:
                fl, fw, fd = io_split(r)
                w = wait_groups(r["be_wait"])
                acc, cum = 0.0, {}
                for i, g in enumerate(groups):
                    acc += w[g]
                    cum[f"g{i}"] = round(acc, 2)
                out.append(dict(t=f(r["t"]), tps=f(r["tps"]), fl=round(fl), fw=round(fl + fw),
                                fd=round(fl + fw + fd), **cum))
            benchlib.write_dat(dat, out, keys)
            shades = checkpoint_shades(ck_of[k], xmax)
            tps = [f(r["tps"]) for r in rows]
            script += shades + [
                f"set title '{title(k)}: tps (mean {statistics.mean(tps):.0f}, median "
                f"{statistics.median(tps):.0f})'", "set ylabel 'tps'", f"set yrange [0:{top:.0f}]",
                f"plot '{dat}' using 1:2 with lines lw 1 lc rgb 'blue' title 'tps'"]
            script += shades + [
                f"set title '{title(k)}: writes of the volume per second'",
                "set ylabel 'writes/s'", f"set yrange [0:{itop:.0f}]",
                f"plot '{dat}' using 1:5 with filledcurves x1 lc rgb '{io_colors[2]}' "
                "title 'data files (the rest)', "
                f"'' using 1:4 with filledcurves x1 lc rgb '{io_colors[1]}' title 'WAL writes', "
                f"'' using 1:3 with filledcurves x1 lc rgb '{io_colors[0]}' "
                "title 'WAL flush requests'"]
            plots = []
            for i in reversed(range(len(groups))):
                plots.append(f"'{dat}' using 1:{6 + i} with filledcurves x1 "
                             f"lc rgb '{colors[i]}' title '{groups[i]}'")
            script += shades + [
                f"set title '{title(k)}: backends by wait'", "set ylabel 'backends'",
                "set yrange [0:8.5]", "plot " + ", ".join(plots)]
        benchlib.gnuplot(script, png)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", 2)[2],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("samples", help="volume-<date>-sample-seconds.csv[.gz], or its directory")
    ap.add_argument("--variant", action="append", default=[],
                    help="only this variant (repeatable; default: all)")
    ap.add_argument("--excerpts", type=int, default=3, metavar="N",
                    help="stall episodes shown second by second per run (default 3)")
    ap.add_argument("--per", type=float, default=45, metavar="S",
                    help="pg_stat_io writes per S seconds (default 45)")
    ap.add_argument("--plot", action="store_true", help="draw the plot (gnuplot)")
    ap.add_argument("--breakdown", action="store_true",
                    help="print where the time goes (waits, device writes by kind) and, with "
                         "--plot, draw it instead (*-breakdown.png)")
    ap.add_argument("--flushes", choices=("auto", "sampled", "wal-fsyncs"), default="auto",
                    help="the device's flush requests in --breakdown: its counter (sampled), "
                         "the WAL fsyncs (samples taken before the counter was read right), "
                         "or auto: the counter when it is ever non-zero")
    ap.add_argument("--run", type=int, action="append", default=[],
                    help="only this run (repeatable; default: all)")
    ap.add_argument("--png", metavar="FILE.png",
                    help="the plot's file (default: next to SAMPLES, *tps-dirty.png)")
    args = ap.parse_args()
    path = sample_file(args.samples)
    secs, cks = read(path)
    order = {x: i for i, x in enumerate(dict.fromkeys(r.get("sb") or "" for r in secs))}
    order.update({x: i for i, x in enumerate(dict.fromkeys(r["variant"] for r in secs))})
    runs = sorted(dict.fromkeys(key(r) for r in secs),
                  key=lambda k: (order[k[0]], order[k[1]], int(k[2])))
    unknown = [v for v in args.variant if v not in {k[1] for k in runs}]
    if unknown:
        sys.exit(f"no variant {unknown} in {path}")
    if args.variant:
        runs = [k for k in runs if k[1] in args.variant]
    global FLUSHES
    FLUSHES = args.flushes
    if args.run:
        runs = [k for k in runs if int(k[2]) in args.run]
    secs_of = {k: [r for r in secs if key(r) == k] for k in runs}
    ck_of = {k: ckpts_of(cks, k) for k in runs}
    if args.breakdown:
        breakdown(runs, secs_of)
        if args.plot:
            png = args.png or re.sub(r"seconds\.csv(\.gz)?$", "breakdown.png", path)
            if png == path:
                sys.exit(f"{path}: not a *seconds.csv[.gz]; give the plot's file name")
            plot_breakdown(png, runs, secs_of, ck_of)
        return
    for k in runs:
        report(k, secs_of[k], ck_of[k], args.excerpts, args.per)
    print("\nstall seconds by cause (sync phase / kernel expiry writeback / other); "
          "acc dirty MB just before each flush-stall")
    for k in runs:
        classify(k, secs_of[k], ck_of[k])
    if any("host_w_iops" in secs_of[k][0] for k in runs):
        print("\ndevice dips (volume IOPS below 1/10 of the run's median) and slow seconds "
              "(a transaction >= 500 ms)")
        for k in runs:
            dips(k, secs_of[k])
    if args.plot:
        png = args.png or re.sub(r"seconds\.csv(\.gz)?$", "tps-dirty.png", path)
        if png == path:
            sys.exit(f"{path}: not a *seconds.csv[.gz]; give the plot's file name")
        plot(png, runs, secs_of, ck_of)


if __name__ == "__main__":
    main()
