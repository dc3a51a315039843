#!/usr/bin/python3
"""What the kernel does with the server's writes on the throttled volume:
record the page cache's and the block layer's tracepoints for the volume
while `make bench-volume` runs, and summarize them.

usage: volume_trace.py record [--dev MAJ:MIN] [--wait-pgbench S] SECONDS OUT
       volume_trace.py analyse OUT
       volume_trace.py wbt [--dev MAJ:MIN] SECONDS OUT
       volume_trace.py wbt-align OUT SAMPLE-SECONDS.csv

record (as root; tracefs at /sys/kernel/tracing): optionally waits until a
pgbench process runs and then S seconds more (--wait-pgbench, to skip the
load and the warm-up), writes the process list to OUT.ps (to name the
server's processes), traces SECONDS seconds with the monotonic clock
(Python's time.monotonic(), as scripts/bench/volume_sampler.py) and writes the
trace to OUT; then disables the events and restores the clock and buffer
size.  The events, filtered to the volume's device (default 7:0, loop0):
  writeback:writeback_dirty_folio   a folio of the page cache became dirty
                                    (fires on clean -> dirty only)
  ext4:ext4_writepages, _result     a writeback of a file range: a
                                    sync_file_range() (the server's
                                    writeback requests), an fsync, or the
                                    kernel's flusher (kupdate: periodic;
                                    cyclic: background)
  writeback:writeback_single_inode  the flusher's passes over an inode
  block:block_bio_queue             every bio queued to the device

analyse prints:
- folio sizes: the page cache's folios can be large (ext4 on recent
  kernels; up to 128 kB on this machine's Linux 6.18), and the kernel
  tracks dirtiness and counts written "pages" per folio: one dirty 8 kB
  block makes a 128 kB folio dirty, and cachestat(2) and pages_written
  count all 32 pages of it, while the bio holds only the dirty blocks.
- per relation file (the three inodes with writeback requests dirtied
  most), each writeback that is not a writeback request (the flusher,
  fsync): how long it took, the pages it
  wrote (whole folios), and the folios the trace still holds dirty when it
  starts: those dirtied < 0.5 s before (writes whose writeback request is
  still pending in the writer's batch, *_flush_after), and those whose
  request was dropped (a request that wrote nothing while the folio was
  dirty: it was under writeback, which sync_file_range(SYNC_FILE_RANGE_
  WRITE) skips).  The trace does not see every cleaning (a folio cleaned
  otherwise stays tracked), so the pages written are the measure; the
  tracked and the dropped counts are upper bounds.
- the bios queued to the device, by kind (data writes, sync writes: WAL
  and fsyncs, cache flushes, reads) and submitter (backends, bgwriter,
  checkpointer, walwriter, kernel threads): a throttle that limits IOPS
  counts each of them, empty cache flushes included.

wbt (as root): records the block layer's writeback throttling (wbt) of the
volume for SECONDS or until interrupted, in a tracefs instance of its own
(so that it can run through a whole `make bench-volume` invocation beside
record): wbt_step (wbt scales the depth it allows down or up), wbt_lat
(a read took longer than wbt's target), wbt_stat and wbt_timer (each
window), and the volume's reads (block_bio_queue, block_rq_complete;
wbt scales down on their latency: few, and cheap to record).  OUT's
first line holds the offset from the monotonic clock to
the wall clock of scripts/bench/volume_sampler.py's ts column.

wbt-align prints, per variant and run of a BENCH_VOLUME_SAMPLE=1
invocation's sample-seconds CSV: the seconds in which wbt allowed less
than its default depth (step > 0: 8, 4, 2 or 1 requests instead of 16),
the slow seconds (a transaction took 500 ms or more, or tps fell below a
tenth of the run's median), how many slow seconds had wbt throttled below
its default, how many of the throttled seconds had a read slower than
2 ms (wbt's default target) in them or the second before, the reads per
second, and each slow second with the smallest depth wbt allowed in it,
the device's IOPS and the reads of that second and the one before.  A
slow second outside wbt's throttling points elsewhere (the device, the
server); one inside it points at wbt, which also throttles WAL's writes
(fdatasync writes data with REQ_SYNC but not REQ_IDLE).
"""

import collections
import os
import re
import select
import signal
import subprocess
import sys
import time

TRACEFS = "/sys/kernel/tracing"
LLONG_MAX = 9223372036854775807
EVENTS = (("writeback/writeback_dirty_folio", "name"),
          ("ext4/ext4_writepages", "dev"),
          ("ext4/ext4_writepages_result", "dev"),
          ("writeback/writeback_single_inode", "name"),
          ("block/block_bio_queue", "dev"))
LINE = re.compile(r"^\s*(.+?)-(\d+)\s+\[\d+\]\s+\S+\s+([\d.]+): (\w+): (.*)$")


def tw(path, value):
    with open(os.path.join(TRACEFS, path), "w") as f:
        f.write(value + "\n")


def tr(path):
    with open(os.path.join(TRACEFS, path)) as f:
        return f.read().strip()


def record(args):
    dev = "7:0"
    wait = None
    while args and args[0].startswith("--"):
        opt = args.pop(0)
        if opt == "--dev":
            dev = args.pop(0)
        elif opt == "--wait-pgbench":
            wait = float(args.pop(0))
        else:
            sys.exit(f"unknown option {opt}")
    if len(args) != 2:
        sys.exit(__doc__)
    seconds, out = float(args[0]), args[1]
    major, minor = (int(x) for x in dev.split(":"))
    kdev = (major << 20) | minor        # dev_t as the kernel's tracepoints hold it
    if wait is not None:
        while subprocess.run(["pgrep", "-x", "pgbench"],
                             stdout=subprocess.DEVNULL).returncode != 0:
            time.sleep(0.2)
        time.sleep(wait)
    with open(out + ".ps", "w") as f:
        subprocess.run(["ps", "-eo", "pid,args"], stdout=f, check=True)
    clock = re.search(r"\[(\w+)\]", tr("trace_clock")).group(1)
    bufsize = tr("buffer_size_kb").split()[0]
    tw("tracing_on", "0")
    tw("trace", "")
    try:
        tw("trace_clock", "mono")
        tw("buffer_size_kb", "262144")
        for ev, field in EVENTS:
            tw(f"events/{ev}/filter",
               f'name == "{dev}"' if field == "name" else f"dev == {kdev}")
            tw(f"events/{ev}/enable", "1")
        tw("tracing_on", "1")
        time.sleep(seconds)
        tw("tracing_on", "0")
        with open(out, "w") as f, open(os.path.join(TRACEFS, "trace")) as t:
            for line in t:
                f.write(line)
    finally:
        for ev, _ in EVENTS:
            tw(f"events/{ev}/enable", "0")
            tw(f"events/{ev}/filter", "0")
        tw("trace", "")
        tw("trace_clock", clock)
        tw("buffer_size_kb", bufsize)
        tw("tracing_on", "1")
    print(f"{out}: {seconds:.0f} s of {dev}; processes in {out}.ps")


def roles(path):
    """pid -> process type, from the process list taken at the start"""
    r = {}
    try:
        lines = open(path).readlines()
    except OSError:
        return r
    for line in lines:
        p = line.strip().split(None, 1)
        if len(p) < 2 or not p[0].isdigit() or not p[1].startswith("postgres: "):
            continue
        what = p[1][len("postgres: "):]
        for prefix, name in (("checkpointer", "checkpointer"),
                             ("background writer", "bgwriter"),
                             ("walwriter", "walwriter"),
                             ("io worker", "io worker"),
                             ("autovacuum", "autovacuum")):
            if what.startswith(prefix):
                r[int(p[0])] = name
                break
        else:
            r[int(p[0])] = "backend"
    return r


def folio_pages(index):
    """a folio's size in pages, from the alignment of its first index (the
    tracepoint gives no size; folios are naturally aligned)"""
    n = 32
    while n > 1 and index % n:
        n //= 2
    return n


def analyse(args):
    if len(args) != 1:
        sys.exit(__doc__)
    path = args[0]
    who_pid = roles(path + ".ps")

    def who(comm, pid):
        if pid in who_pid:
            return who_pid[pid]
        if comm.startswith("kworker"):
            return "kernel (kworker)"
        if comm.startswith("jbd2"):
            return "kernel (ext4 journal)"
        if comm == "postgres":
            return "backend"        # started after the process list
        return comm

    sizes = collections.Counter()
    dirtied = collections.Counter()
    by_inode = collections.defaultdict(dict)    # ino -> folio -> [t, who, dropped]
    pending = {}                                # pid -> the writepages call
    passes = []
    requests = collections.Counter()
    requested = set()                           # relation files: inodes with requests
    bios = collections.Counter()
    t_first = t_last = None
    for line in open(path):
        m = LINE.match(line)
        if not m:
            continue
        comm, pid, t, event, rest = m.group(1), int(m.group(2)), float(m.group(3)), m.group(4), m.group(5)
        t_first = t if t_first is None else t_first
        t_last = t
        if event == "block_bio_queue":
            b = re.match(r"\S+ (\S+) \d+ \+ (\d+)", rest)
            if not b:
                continue
            rwbs, sectors = b.group(1), int(b.group(2))
            if rwbs.startswith("F") and sectors == 0:
                kind = "cache flush (empty)"
            elif "W" in rwbs:
                kind = "sync write (WAL, fsync)" if "S" in rwbs else "write"
            elif "R" in rwbs:
                kind = "read"
            else:
                kind = rwbs
            bios[(kind, who(comm, pid), "n")] += 1
            bios[(kind, who(comm, pid), "kB")] += sectors // 2
            continue
        # "key value" (ext4) or "key=value" (writeback) pairs; writeback's
        # leading "bdi 7:0:" would otherwise read as bdi = 7
        kv = dict(re.findall(r"(\w+)[ =](-?\d+)", rest.replace("bdi ", "bdi=0 ")))
        if "ino" not in kv:
            continue
        ino = int(kv["ino"])
        if event == "writeback_dirty_folio":
            idx = int(kv["index"])
            sizes[folio_pages(idx)] += 1
            dirtied[ino] += 1
            by_inode[ino][idx] = [t, who(comm, pid), 0]
        elif event == "ext4_writepages":
            start, end = int(kv["range_start"]), int(kv["range_end"])
            if int(kv["for_kupdate"]):
                kind = "flusher (kupdate, periodic)"
            elif int(kv["range_cyclic"]):
                kind = "flusher (background)"
            elif end == LLONG_MAX:
                kind = "fsync" if int(kv["sync_mode"]) else "whole file"
            else:
                kind = "request"
            found = collections.Counter()
            if kind != "request":
                # what the flusher or fsync finds dirty when it starts
                for f, st in list(by_inode[ino].items()):
                    del by_inode[ino][f]
                    found["tracked"] += 1
                    found["dirtied < 0.5 s before"] += t - st[0] < 0.5
                    found["request dropped"] += st[2] > 0
            pending[pid] = (t, ino, start // 4096, end // 4096, kind, who(comm, pid), found)
        elif event == "ext4_writepages_result":
            call = pending.pop(pid, None)
            if call is None or call[1] != ino:
                continue
            t0, _, lo, hi, kind, by, found = call
            written = int(kv["pages_written"])
            if kind == "request":
                folios = by_inode[ino]
                if hi - lo < 1024:
                    cand = [f for f in range(lo - lo % 32 - 32, hi + 1) if f in folios]
                else:
                    cand = list(folios)
                covered = [f for f in cand if f <= hi and f + folio_pages(f) > lo]
                requested.add(ino)
                requests[(by, "requests")] += 1
                if written == 0:
                    for f in covered:
                        folios[f][2] += 1
                        requests[(by, "dropped: the dirty folio was under writeback")] += 1
                else:
                    for f in covered:
                        del folios[f]
            else:
                last = passes[-1] if passes else None
                if last and last[1] == ino and last[2] == kind and t0 - last[5] < 2.0:
                    # the flusher writes an inode in chunks: one pass
                    last[3] += written
                    last[4].update(found)
                    last[5] = t
                else:
                    passes.append([t0, ino, kind, written, found, t])
    if t_first is None:
        sys.exit(f"{path}: no events")
    span = t_last - t_first
    print(f"{path}: {span:.0f} s traced")
    if sizes:
        total = sum(sizes.values())
        print("folios dirtied, by size (pages of 4 kB, from their alignment): " +
              ", ".join(f"{k}: {100.0 * v / total:.1f}%" for k, v in sorted(sizes.items(), reverse=True)))
        top = [ino for ino, _ in dirtied.most_common() if ino in requested][:3]
        print("relation files (inodes with writeback requests) dirtied most (folios dirtied): " +
              ", ".join(f"{ino} ({dirtied[ino]})" for ino in top))
        for (by, what), n in sorted(requests.items()):
            print(f"  writeback requests of {by}: {what}: {n}")
        print("writebacks other than requests, on those inodes (t from the trace's start):")
        for t0, ino, kind, written, found, t1 in passes:
            if ino in top and written > 0:
                print(f"  t {t0 - t_first:6.1f}  inode {ino}  {kind:28s} {t1 - t0:5.2f} s, pages {written:6d}; "
                      f"dirty folios tracked {found['tracked']}, of which dirtied < 0.5 s before "
                      f"{found['dirtied < 0.5 s before']}, request dropped {found['request dropped']}")
    if bios:
        print("bios queued to the device, per second of the trace (count, MB/s), by kind and submitter:")
        kinds = sorted({k for k, _, _ in bios})
        total = 0
        for kind in kinds:
            n = sum(v for (k, _, u), v in bios.items() if k == kind and u == "n")
            total += n
            subs = sorted(((v, w) for (k, w, u), v in bios.items() if k == kind and u == "n"), reverse=True)
            kb = sum(v for (k, _, u), v in bios.items() if k == kind and u == "kB")
            print(f"  {kind:25s} {n / span:7.0f}/s {kb / 1024.0 / span:6.1f} MB/s   " +
                  ", ".join(f"{w} {v / span:.0f}/s" for v, w in subs[:5]))
        print(f"  {'all':25s} {total / span:7.0f}/s")


WBT_EVENTS = ("wbt_step", "wbt_lat", "wbt_stat", "wbt_timer")
READ_EVENTS = ("block_bio_queue", "block_rq_complete")     # the reads wbt's latency is taken of
WBT_INSTANCE = "instances/volume_trace_wbt"


def wbt(args):
    dev = "7:0"
    if args and args[0] == "--dev":
        dev = args[1]
        args = args[2:]
    if len(args) != 2:
        sys.exit(__doc__)
    seconds, out = float(args[0]), args[1]
    major, minor = (int(x) for x in dev.split(":"))
    inst = os.path.join(TRACEFS, WBT_INSTANCE)
    if not os.path.isdir(os.path.join(TRACEFS, "instances")):
        subprocess.run(["mount", "-t", "tracefs", "nodev", TRACEFS], check=True)
    # kill or ^C: stop and clean up.  SIGINT too: a shell without job control
    # starts background commands with SIGINT ignored, and Python keeps that.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        # Inside the try: a kill right after the mkdir must not leave the instance behind.
        os.makedirs(inst, exist_ok=True)
        tw(f"{WBT_INSTANCE}/trace_clock", "mono")
        tw(f"{WBT_INSTANCE}/buffer_size_kb", "16384")
        for ev in WBT_EVENTS:
            tw(f"{WBT_INSTANCE}/events/wbt/{ev}/filter", f'name == "{dev}"')
            tw(f"{WBT_INSTANCE}/events/wbt/{ev}/enable", "1")
        for ev in READ_EVENTS:
            tw(f"{WBT_INSTANCE}/events/block/{ev}/filter",
               f'dev == {(major << 20) | minor} && rwbs ~ "R*"')
            tw(f"{WBT_INSTANCE}/events/block/{ev}/enable", "1")
        fd = os.open(os.path.join(inst, "trace_pipe"), os.O_RDONLY | os.O_NONBLOCK)
        with open(out, "wb") as f:
            f.write(f"# wall_minus_mono {time.time() - time.monotonic():.6f} dev {dev} "
                    f"start_mono {time.monotonic():.6f} reads\n".encode())
            end = time.monotonic() + seconds
            try:
                while time.monotonic() < end:
                    if select.select([fd], [], [], 0.5)[0]:
                        try:
                            f.write(os.read(fd, 1 << 16))
                        except BlockingIOError:
                            pass
            except KeyboardInterrupt:
                pass
            os.close(fd)
    finally:
        if os.path.isdir(inst):
            for ev in WBT_EVENTS:
                tw(f"{WBT_INSTANCE}/events/wbt/{ev}/enable", "0")
            for ev in READ_EVENTS:
                tw(f"{WBT_INSTANCE}/events/block/{ev}/enable", "0")
            os.rmdir(inst)
    print(f"{out}: wbt of {dev}")


def wbt_align(args):
    import bisect
    import csv
    import statistics
    if len(args) != 2:
        sys.exit(__doc__)
    path, seconds_csv = args
    with open(path) as f:
        head = f.readline().split()
        offset, start = float(head[2]), float(head[6]) + float(head[2])
        steps = []                  # (wall time, step, depth allowed) from then on
        reads = []                  # (wall time queued, ms to completion) of each read request
        queued = {}                 # first sector -> wall time its bio was queued
        have_reads = "reads" in head[7:]        # older files: wbt only
        for line in f:
            m = LINE.match(line)
            if not m:
                continue
            t = float(m.group(3)) + offset
            if m.group(4) == "wbt_step":
                st = re.search(r"step=(-?\d+).*max=(\d+)", m.group(5))
                steps.append((t, int(st.group(1)), int(st.group(2))))
            elif m.group(4) in READ_EVENTS:
                sector = re.search(r"\s(\d+) \+ \d+", m.group(5))
                if not sector:
                    continue
                if m.group(4) == "block_bio_queue":
                    queued[sector.group(1)] = t
                elif sector.group(1) in queued:     # a request's first bio (others merged)
                    q = queued.pop(sector.group(1))
                    reads.append((q, (t - q) * 1000.0))
    times = [x[0] for x in steps]
    reads.sort()
    rtimes = [x[0] for x in reads]

    def reads_in(t0, t1):
        return reads[bisect.bisect_left(rtimes, t0):bisect.bisect_left(rtimes, t1)]
    runs = collections.defaultdict(list)
    with open(seconds_csv) as f:
        for r in csv.DictReader(f):
            runs[(r["variant"], r["run"])].append(r)
    print(f"{path}: {len(steps)} wbt steps, {len(reads)} reads; per variant and run: seconds in "
          "which wbt allowed less than its default depth (throttled), slow seconds, slow and "
          "throttled; the volume's reads (queued to completed) and those over 2 ms (wbt's default "
          "target; see blk-wbt.c, latency_exceeded())")
    for (variant, run), rows in sorted(runs.items()):
        median = statistics.median(float(r["tps"] or 0) for r in rows)
        throttled, slow, untraced, after_slow_read = 0, [], 0, 0
        traced = [float(r["ts"]) for r in rows if float(r["ts"]) - 1.0 >= start]
        run_reads = reads_in(min(traced) - 1.0, max(traced)) if traced else []
        for r in rows:
            t1 = float(r["ts"])
            if t1 - 1.0 < start:
                untraced += 1
                continue
            i, j = bisect.bisect_left(times, t1 - 1.0), bisect.bisect_right(times, t1)
            inside = steps[max(i - 1, 0):j]     # with the step in force as the second began
            low = min((x[2] for x in inside if x[1] > 0), default=None)
            throttled += low is not None
            # wbt steps down at the end of a window in which a read was slow: look 1 s back
            near = reads_in(t1 - 2.0, t1)
            longest_read = max((x[1] for x in near), default=0.0)
            after_slow_read += low is not None and longest_read > 2.0
            if float(r["lat_max_ms"] or 0) >= 500 or float(r["tps"] or 0) < median / 10:
                slow.append((r["t"], r["tps"], r["lat_max_ms"], low, r["dev_w_iops"],
                             len(near), longest_read))
        span = max(len(traced), 1)
        if have_reads:
            reads_desc = (f" ({after_slow_read} with a read over 2 ms in it or the second before)",
                          f"; reads {len(run_reads) / span:.0f}/s, over 2 ms "
                          f"{sum(x[1] > 2.0 for x in run_reads) / span:.1f}/s")
        else:
            reads_desc = ("", "; reads not recorded")
        print(f"  {variant} run {run}: {len(rows) - untraced} s traced, throttled {throttled}"
              f"{reads_desc[0]}, slow {len(slow)}, slow and throttled "
              f"{sum(s[3] is not None for s in slow)}{reads_desc[1]}")
        for t, tps, lat, low, iops, nread, longest_read in slow:
            print(f"    t {float(t):5.0f}  tps {float(tps or 0):6.0f}  longest {float(lat or 0):6.0f} ms  "
                  f"wbt depth {low if low is not None else 'default or more':>3}  device {iops} IOPS" +
                  (f"  reads (2 s) {nread}, longest {longest_read:.1f} ms" if have_reads else ""))


def main():
    cmds = {"record": record, "analyse": analyse, "wbt": wbt, "wbt-align": wbt_align}
    if len(sys.argv) < 2 or sys.argv[1] not in cmds:
        sys.exit(__doc__)
    cmds[sys.argv[1]](sys.argv[2:])


if __name__ == "__main__":
    main()
