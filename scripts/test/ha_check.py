#!/usr/bin/python3
"""make ha-check, the orchestration (run by scripts/test/ha-check.sh as the
build user, with Debian's /usr/bin/python3: apt's psycopg2, as patroni's own
shebang).

A three-node PostgreSQL cluster under Patroni (Debian 12's patroni 3.0.2)
with one etcd member (etcd-server 3.4) as DCS, everything on 127.0.0.1:
PostgreSQL 6471-6473, Patroni REST 8471-8473, etcd 2479 (clients) and 2480
(peers).  Every node starts on stock 18.6; under a write load that never
stops, the series is rolled in (each replica, a switchover to an upgraded
replica, the old primary), a failover with pg_rewind is forced, and the
series is rolled back to stock the same way.  After every step the state is
checked (below); the end is a table of steps and node states.

Per-node binaries: each node's Patroni has bin_dir = RUN/nN/bin, a symlink
to one tree's bin/ (the series, stock, or a broken tree whose postgres
exits 1).  Patroni 3.0.2 joins bin_dir and the program on every call but
reads bin_dir only at its start (a reload does not switch it), so a roll is
"ln -sfn TREE/bin RUN/nN/bin" and "patronictl restart": the running
postmaster keeps its binary, the restart starts the other one, as apt does
under a running cluster.  PostgreSQL resolves the symlink to find its
share/ and lib/, so each node runs entirely from its tree.

Steps (the numbers of the summary table):
  0  bootstrap: etcd, n1 (initdb), n2 and n3 (pg_basebackup), all stock; the
     load starts (2 workers, HA_RATE commits/s in all, default 20)
  1  n2 -> a bin dir whose postgres exits 1 (deliberate): patronictl
     restart fails; checked: the failure is reported (Patroni's state of
     n2), the cluster goes on acknowledging commits on n1 and n3
  2  n2 -> series, restarted (stock primary, a series replica)
  3  n3 -> series (stock primary, series replicas)
  4  switchover n1 -> the sync standby (series primary, stock replica n1)
  5  CREATE EXTENSION pg_checkpoint_stats on the series primary; the stock
     replica replays it (objects there, library not: its queries fail)
  6  n1 -> series (all series; the extension works everywhere, and
     pg_stat_progress_checkpoint shows a running checkpoint)
  7  failover with pg_rewind: the leader's Patroni is killed, its PostgreSQL
     goes on as a primary until the leader key expires and the sync standby
     takes over; a row committed locally on the old primary makes it
     diverge, it stops as in a crash, Patroni starts again and pg_rewind
     brings it back (HA_FAILOVER: crash, restart, stop; failover_rewind())
  8  the first replica -> stock
  9  the other replica -> stock (series primary, stock replicas)
 10  switchover to the (stock) sync standby; DROP EXTENSION on the stock
     primary
 11  the old primary -> stock (all stock)
 12  the load stops; final checks

Checks after each step, where they apply:
  binaries    each node's postmaster runs the tree its link names
              (/proc/PID/exe), checkpoint_sort exists only on the series
  replication the leader's pg_stat_replication has 2 streaming rows (one
              sync), each replica's pg_stat_wal_receiver streams, and a
              marker row written on the leader is on every replica
  zero loss   every commit the load client saw acknowledged (COMMIT
              returned, without "canceling wait for synchronous replication")
              is on every node once it has replayed up to the leader's LSN;
              commits that ended in an error are in doubt: listed, not failed
  timelines   leader (pg_control after a CHECKPOINT), replicas
              (pg_stat_wal_receiver.received_tli) and Patroni agree on
              1 + the number of promotions; the leader's history file has as
              many entries
  sort=       after a CHECKPOINT on the leader and one (a restartpoint) on
              each replica, the newest "checkpoint complete" or "restartpoint
              complete" line of each node's current checkpointer ends with
              "; sort=" if and only if the node runs the series
  extension   where the series runs the views of pg_checkpoint_stats
              answer; on stock, the objects are there (replicated) and
              querying them fails: 58P01 (pg_checkpoint_stats: no library)
              and, for pg_stat_progress_checkpoint, stock's error about the
              progress command; the stock replica keeps replaying

Environment (ha-check.sh sets the first ones): HA_SERIES, HA_STOCK (the two
installation trees), HA_DIR (work/ha), HA_RATE (20), HA_TTL (20), HA_LOOP_WAIT
(5), HA_FAILOVER (crash, restart or stop: step 7), HA_KEEP=1 (keep the data
directories), HA_STOP_AFTER=N (stop after
step N, for development), HA_MEASURE=1 (the switchover measurement instead
of the functional check; see measure() below).  Output: HA_DIR/run/
(summary.txt, results.tsv, the load's acked and in-doubt ids, and per node
patroni.log and pglog/postgresql.log).

Passwords (PostgreSQL superuser and replication user, the REST API's basic
auth) are random per run; the Patroni configurations and password files that
hold them are in a private temporary directory outside the repository,
removed on exit.  Every exit (end, error, ^C, SIGTERM) stops the load, the
Patroni processes (which stop their PostgreSQL), any postmaster left (by its
postmaster.pid), and etcd, and removes the data and temporary directories.
"""

import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

import psycopg2

NODES = ["n1", "n2", "n3"]
PG_PORT = {"n1": 6471, "n2": 6472, "n3": 6473}
API_PORT = {"n1": 8471, "n2": 8472, "n3": 8473}
ETCD_CLIENT, ETCD_PEER = 2479, 2480
HOST = "127.0.0.1"
SCOPE = "ha-check"

env = os.environ.get
RATE = float(env("HA_RATE", "20"))
TTL = int(env("HA_TTL", "20"))
LOOP_WAIT = int(env("HA_LOOP_WAIT", "5"))
RETRY_TIMEOUT = int(env("HA_RETRY_TIMEOUT", "5"))
KEEP = env("HA_KEEP", "") == "1"
STOP_AFTER = int(env("HA_STOP_AFTER", "99"))
MEASURE_MNT = env("HA_MEASURE_MNT", "")       # set by ha-check.sh for HA_MEASURE=1
T0 = time.time()


def now():
    return time.strftime("%H:%M:%S")


def log(msg):
    print(f"[{now()} +{time.time() - T0:5.0f}s] {msg}", flush=True)


class Interrupted(Exception):
    pass


def on_term(signum, frame):
    raise Interrupted(f"signal {signum}")


# ---------------------------------------------------------------- the load
def load_main(argv):
    """The write load: `ha_check.py load OUTDIR WORKERS RATE CONNINFO`.
    Each worker inserts one row per transaction (autocommit) with ids of its
    own, never retried, and appends each id to acked-wK.tsv (id, server
    port, time, seconds the INSERT took) once COMMIT returned without error
    or a "canceling wait for synchronous replication" warning, or to
    doubt-wK.tsv (id, time, why) otherwise.  On SIGTERM it stops; an id in
    flight then is in doubt."""
    out, workers, rate, conninfo = argv[0], int(argv[1]), float(argv[2]), argv[3]
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda s, f: stop.set())
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    inflight = {}

    def worker(k):
        interval = workers / rate
        acked = os.open(f"{out}/acked-w{k}.tsv", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        doubt = os.open(f"{out}/doubt-w{k}.tsv", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        errs = os.open(f"{out}/errors-w{k}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        conn, seq, nxt = None, 0, time.monotonic()
        while not stop.is_set():
            if conn is None:
                try:
                    conn = psycopg2.connect(conninfo)
                    conn.autocommit = True
                except psycopg2.Error as e:
                    os.write(errs, f"{time.time():.3f}\tconnect\t{str(e).strip()!r}\n".encode())
                    conn = None
                    time.sleep(0.1)
                    continue
            seq += 1
            id_ = seq * workers + k
            inflight[k] = id_
            t_start = time.time()
            try:
                del conn.notices[:]
                cur = conn.cursor()
                cur.execute("INSERT INTO ha_load (id, worker, port) VALUES (%s, %s, inet_server_port()) "
                            "RETURNING port", (id_, k))
                port = cur.fetchone()[0]
                warn = [n for n in conn.notices if "synchronous replication" in n]
                if warn:
                    os.write(doubt, f"{id_}\t{time.time():.3f}\t{warn[0].strip()!r}\n".encode())
                else:
                    t = time.time()
                    os.write(acked, f"{id_}\t{port}\t{t:.3f}\t{t - t_start:.4f}\n".encode())
            except psycopg2.Error as e:
                os.write(doubt, f"{id_}\t{time.time():.3f}\t{str(e).strip()!r}\n".encode())
                try:
                    conn.close()
                except psycopg2.Error:
                    pass
                conn = None
                time.sleep(0.1)
            inflight.pop(k, None)
            nxt = max(nxt + interval, time.monotonic() - 1)
            d = nxt - time.monotonic()
            if d > 0:
                stop.wait(d)
        if conn is not None:
            conn.close()

    threads = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(workers)]
    for t in threads:
        t.start()
    while not stop.is_set():
        stop.wait(1)
    for t in threads:
        t.join(10)
    with open(f"{out}/doubt-inflight.tsv", "a") as f:
        for k, id_ in list(inflight.items()):
            f.write(f"{id_}\t{time.time():.3f}\t'in flight when the load stopped'\n")
    return 0


# ------------------------------------------------------------ the cluster
class Check:
    def __init__(self):
        self.trees = {"series": os.path.realpath(env("HA_SERIES")),
                      "stock": os.path.realpath(env("HA_STOCK"))}
        for name, t in self.trees.items():
            if not os.access(f"{t}/bin/postgres", os.X_OK):
                sys.exit(f"HA_{name.upper()}: {t}/bin/postgres missing")
        self.dir = os.path.realpath(env("HA_DIR"))
        self.run = f"{self.dir}/run"
        self.tmp = None
        self.procs = {}          # name -> Popen (etcd, n1.., load)
        self.stopped = set()     # Patroni processes under SIGSTOP
        self.results = []        # (step, check, ok, detail)
        self.steps = []          # rows of the summary table
        self.step_no = 0
        self.step_name = ""
        self.step_t0 = time.time()
        self.tl = 1              # expected timeline
        self.ext = False         # pg_checkpoint_stats created
        self.rewound = []
        self.load_t0 = None
        self.switchovers = []    # (what, seconds to new leader, write gap)
        self.pw = {k: secrets.token_urlsafe(18) for k in ("postgres", "replicator", "rest")}

    # -------------------------------------------------------------- setup
    def prepare(self):
        if os.path.exists(self.run):
            shutil.rmtree(self.run)
        os.makedirs(f"{self.run}/load")
        os.makedirs(f"{self.run}/pids")
        # the private directory of the configurations, passwords and sockets
        self.tmp = tempfile.mkdtemp(prefix="ha-check.")
        os.chmod(self.tmp, 0o700)
        with open(f"{self.run}/tmpdir", "w") as f:
            f.write(self.tmp + "\n")
        # the broken tree: every program of stock, but a postgres that exits 1
        broken = f"{self.dir}/trees/broken"
        shutil.rmtree(broken, ignore_errors=True)
        os.makedirs(f"{broken}/bin")
        for p in os.listdir(f"{self.trees['stock']}/bin"):
            if p != "postgres":
                os.symlink(f"{self.trees['stock']}/bin/{p}", f"{broken}/bin/{p}")
        with open(f"{broken}/bin/postgres", "w") as f:
            f.write("#!/bin/sh\n# make ha-check: new binaries that do not start\n"
                    "echo 'ha-check: this postgres does not start (deliberately broken tree)' >&2\nexit 1\n")
        os.chmod(f"{broken}/bin/postgres", 0o755)
        self.trees["broken"] = broken
        pgpass = f"{self.tmp}/checker.pgpass"
        with open(pgpass, "w") as f:
            f.write(f"{HOST}:*:*:postgres:{self.pw['postgres']}\n")
        os.chmod(pgpass, 0o600)
        os.environ["PGPASSFILE"] = pgpass
        for n in NODES:
            os.makedirs(f"{self.run}/{n}/pglog")
            os.makedirs(f"{self.tmp}/{n}")
            self.link(n, "stock")
            self.write_yml(n)

    def write_yml(self, n):
        # JSON is YAML: no quoting surprises
        cfg = {
            "scope": SCOPE, "namespace": "/ha-check/", "name": n,
            "log": {"dir": f"{self.run}/{n}", "level": "INFO", "file_num": 2, "file_size": 50000000},
            "restapi": {"listen": f"{HOST}:{API_PORT[n]}", "connect_address": f"{HOST}:{API_PORT[n]}",
                        "authentication": {"username": "ha-check", "password": self.pw["rest"]}},
            "etcd3": {"hosts": [f"{HOST}:{ETCD_CLIENT}"]},
            "bootstrap": {
                "dcs": {
                    "ttl": TTL, "loop_wait": LOOP_WAIT, "retry_timeout": RETRY_TIMEOUT,
                    "maximum_lag_on_failover": 16 * 1024 * 1024,
                    "synchronous_mode": True,
                    "postgresql": {
                        "use_pg_rewind": True, "use_slots": True,
                        "parameters": {
                            "max_connections": 40, "shared_buffers": "32MB",
                            "wal_level": "replica", "hot_standby": "on", "wal_log_hints": "on",
                            "max_wal_senders": 10, "max_replication_slots": 10,
                            "wal_keep_size": "256MB", "max_wal_size": "256MB",
                            "log_checkpoints": "on", "logging_collector": "on",
                            "log_filename": "postgresql.log", "log_rotation_age": 0,
                            "log_rotation_size": 0, "log_line_prefix": "%m [%p] ", "log_timezone": "UTC",
                        },
                    },
                },
                "initdb": [{"encoding": "UTF8"}, {"locale": "C"}, "data-checksums"],
            },
            "postgresql": {
                "listen": f"{HOST}:{PG_PORT[n]}", "connect_address": f"{HOST}:{PG_PORT[n]}",
                "data_dir": self.data_dir(n), "bin_dir": f"{self.run}/{n}/bin",
                "pgpass": f"{self.tmp}/{n}/pgpass",
                "authentication": {
                    "superuser": {"username": "postgres", "password": self.pw["postgres"]},
                    "replication": {"username": "replicator", "password": self.pw["replicator"]},
                },
                # each node its own (absolute) log directory and socket
                # directory: local settings, not in the DCS (a base backup
                # would otherwise copy the leader's)
                "parameters": {"log_directory": f"{self.run}/{n}/pglog",
                               "unix_socket_directories": f"{self.tmp}/{n}"},
                # pg_basebackup's default waits for a spread checkpoint
                "basebackup": [{"checkpoint": "fast"}],
                "pg_hba": [
                    "local all all trust",
                    f"host all all {HOST}/32 scram-sha-256",
                    f"host replication replicator {HOST}/32 scram-sha-256",
                ],
            },
        }
        if MEASURE_MNT:
            # the measurement (plan of issue 58, section 5): a dirty set that
            # only the switchover's CHECKPOINT writes
            cfg["bootstrap"]["dcs"]["postgresql"]["parameters"].update(
                {"shared_buffers": "512MB", "checkpoint_timeout": "30min", "max_wal_size": "8GB",
                 "wal_keep_size": "1GB"})
        path = f"{self.tmp}/{n}.yml"
        with open(path, "w") as f:
            json.dump(cfg, f, indent=1)
        os.chmod(path, 0o600)

    def data_dir(self, n):
        return f"{MEASURE_MNT}/{n}/data" if MEASURE_MNT else f"{self.run}/{n}/data"

    def link(self, n, tree):
        """Point n's bin_dir at a tree: ln -sfn TREE/bin RUN/n/bin."""
        tmp = f"{self.run}/{n}/bin.new"
        if os.path.lexists(tmp):
            os.unlink(tmp)
        os.symlink(f"{self.trees[tree]}/bin", tmp)
        os.replace(tmp, f"{self.run}/{n}/bin")

    def spawn(self, name, cmd, logfile):
        f = open(logfile, "ab")
        p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             start_new_session=True, close_fds=True)
        f.close()
        self.procs[name] = p
        with open(f"{self.run}/pids/{name}.pid", "w") as pf:
            pf.write(f"{p.pid}\n")
        return p

    def start_etcd(self):
        log(f"etcd {subprocess.run(['etcd', '--version'], capture_output=True, text=True).stdout.split()[2]}"
            f" on {HOST}:{ETCD_CLIENT} (peer {ETCD_PEER})")
        self.spawn("etcd", [
            "etcd", "--name", "ha-check", "--data-dir", f"{self.run}/etcd",
            "--listen-client-urls", f"http://{HOST}:{ETCD_CLIENT}",
            "--advertise-client-urls", f"http://{HOST}:{ETCD_CLIENT}",
            "--listen-peer-urls", f"http://{HOST}:{ETCD_PEER}",
            "--initial-advertise-peer-urls", f"http://{HOST}:{ETCD_PEER}",
            "--initial-cluster", f"ha-check=http://{HOST}:{ETCD_PEER}",
            "--initial-cluster-token", f"ha-check-{secrets.token_hex(4)}",
            "--initial-cluster-state", "new"], f"{self.run}/etcd.log")
        self.wait(lambda: self.http(f"http://{HOST}:{ETCD_CLIENT}/health") is not None, 30, "etcd healthy")

    def start_patroni(self, n):
        self.spawn(n, ["/usr/bin/patroni", f"{self.tmp}/{n}.yml"], f"{self.run}/{n}/patroni.stdout")

    # ------------------------------------------------------------ helpers
    @staticmethod
    def http(url, timeout=3):
        try:
            with urllib.request.urlopen(url, timeout=timeout) as r:
                return json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            try:
                return json.loads(e.read() or b"null")
            except ValueError:
                return None
        except (OSError, ValueError):
            return None

    def cluster(self):
        """Patroni's /cluster, from the first node that answers."""
        for n in NODES:
            if n in self.stopped:
                continue
            c = self.http(f"http://{HOST}:{API_PORT[n]}/cluster")
            if c and "members" in c:
                return {m["name"]: m for m in c["members"]}
        return {}

    def leader(self, c=None):
        c = c if c is not None else self.cluster()
        for n, m in c.items():
            if m["role"] in ("leader", "master"):
                return n
        return None

    def sync_standby(self, c=None):
        c = c if c is not None else self.cluster()
        for n, m in c.items():
            if m["role"] == "sync_standby":
                return n
        return None

    def wait(self, cond, timeout, what, interval=0.5):
        end = time.time() + timeout
        while True:
            try:
                r = cond()
            except (psycopg2.Error, OSError):
                r = None
            if r:
                return r
            if time.time() > end:
                log(f"timeout ({timeout} s) waiting for: {what}")
                return None
            time.sleep(interval)

    def conn(self, n, timeout=5):
        c = psycopg2.connect(host=HOST, port=PG_PORT[n], user="postgres", dbname="postgres",
                             connect_timeout=timeout, application_name="ha-check",
                             options="-c statement_timeout=60000")
        c.autocommit = True
        return c

    def q(self, n, sql, args=None, one=True):
        c = self.conn(n)
        try:
            cur = c.cursor()
            cur.execute(sql, args)
            if cur.description is None:
                return None
            rows = cur.fetchall()
            return (rows[0][0] if rows else None) if one else rows
        finally:
            c.close()

    def try_q(self, n, sql, args=None, one=True):
        try:
            return self.q(n, sql, args, one)
        except psycopg2.Error:
            return None

    def postmaster_pid(self, n):
        try:
            with open(f"{self.data_dir(n)}/postmaster.pid") as f:
                pid = int(f.readline())
            os.kill(pid, 0)
            return pid
        except (OSError, ValueError):
            return None

    def running_build(self, n):
        """Which tree n's postmaster runs (its /proc/PID/exe), or None."""
        pid = self.postmaster_pid(n)
        if not pid:
            return None
        try:
            exe = os.path.realpath(f"/proc/{pid}/exe")
        except OSError:
            return None
        for name, t in self.trees.items():
            if exe == os.path.realpath(f"{t}/bin/postgres"):
                return name
        return exe

    def streaming(self, n):
        return self.try_q(n, "SELECT status FROM pg_stat_wal_receiver") == "streaming"

    def healthy(self, expect_leader=None, nodes=None):
        """All of nodes running, a leader (expect_leader if given), the others
        streaming from it, the leader with as many streaming replicas."""
        nodes = nodes or NODES
        c = self.cluster()
        ld = self.leader(c)
        if not ld or (expect_leader and ld != expect_leader):
            return False
        if any(c.get(n, {}).get("state") != "running" for n in nodes):
            return False
        reps = [n for n in nodes if n != ld]
        if not all(self.streaming(n) for n in reps):
            return False
        cnt = self.try_q(ld, "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'")
        return cnt is not None and cnt >= len(reps) and (not reps or self.sync_standby(c) is not None)

    def patroni_log(self, n):
        out = []
        for name in sorted(os.listdir(f"{self.run}/{n}"), reverse=True):
            if name.startswith("patroni.log"):
                with open(f"{self.run}/{n}/{name}", errors="replace") as f:
                    out.append(f.read())
        return "".join(out)

    def start_load(self):
        """Starts the write load (two workers, RATE commits/s in all), which
        reaches whichever node is the leader through a multi-host conninfo."""
        conninfo = (f"host={HOST},{HOST},{HOST} port={PG_PORT['n1']},{PG_PORT['n2']},{PG_PORT['n3']} "
                    f"dbname=postgres user=postgres target_session_attrs=read-write connect_timeout=2 "
                    f"application_name=ha-load")
        self.spawn("load", [sys.executable, os.path.abspath(__file__), "load", f"{self.run}/load", "2",
                            str(RATE), conninfo], f"{self.run}/load/load.log")
        self.load_t0 = time.time()

    def load_records(self, prefix):
        """The fields of every complete line of the load's files whose names
        start with prefix ("acked-": id, port, time, latency; "doubt-": id,
        time, why), one list per line."""
        d = f"{self.run}/load"
        for name in os.listdir(d):
            if name.startswith(prefix):
                with open(f"{d}/{name}") as f:
                    for line in f:
                        if line.endswith("\n"):
                            yield line.rstrip("\n").split("\t")

    def acked(self):
        """{id: (port, time)} of every acknowledged commit so far."""
        return {int(p[0]): (int(p[1]), float(p[2])) for p in self.load_records("acked-")}

    def doubt(self):
        """{id: (time, why)} of every commit whose outcome is unknown."""
        return {int(p[0]): (float(p[1]), "\t".join(p[2:])) for p in self.load_records("doubt-")}

    def gap(self, t0, t1=None):
        """(acks, longest time without an ack) in [t0, t1]."""
        ts = sorted(t for _, t in self.acked().values() if t >= t0 and (t1 is None or t <= t1))
        if not ts:
            return 0, (t1 or time.time()) - t0
        pts = [t0] + ts + [t1 or time.time()]
        return len(ts), max(b - a for a, b in zip(pts, pts[1:]))

    # ------------------------------------------------------------- results
    def result(self, check, ok, detail=""):
        self.results.append((self.step_no, check, bool(ok), detail))
        log(f"  {'PASS' if ok else 'FAIL'}  {check}{': ' + detail if detail else ''}")
        return ok

    def begin(self, no, name):
        self.step_no, self.step_name, self.step_t0 = no, name, time.time()
        log(f"== {no}. {name}")

    def close_step(self, what):
        """The row of a step that did not end (interrupted, aborted)."""
        if self.step_name and not any(st["no"] == self.step_no for st in self.steps):
            self.step_name = what + " " + self.step_name
            try:
                self.end(stop=False)
            except Exception:  # noqa: a summary row is not worth a traceback
                pass

    def end(self, stop=True):
        c = self.cluster()
        state = {}
        for n in NODES:
            m = c.get(n)
            b = self.running_build(n)
            if not b:
                state[n] = "DOWN"
            else:
                role = {"leader": "L", "master": "L", "sync_standby": "S"}.get(m["role"], "R") if m else "?"
                state[n] = f"{b} {role}"
        acks, gap = self.gap(max(self.step_t0, self.load_t0 or time.time()))
        res = [r for r in self.results if r[0] == self.step_no]
        self.steps.append({"no": self.step_no, "name": self.step_name, "state": state, "tl": self.tl,
                           "acks": acks, "gap": gap, "ok": sum(r[2] for r in res),
                           "n": len(res), "secs": time.time() - self.step_t0})
        if stop and self.step_no >= STOP_AFTER:
            raise Interrupted(f"HA_STOP_AFTER={STOP_AFTER}")

    # -------------------------------------------------------------- checks
    def check_state(self, expect):
        """The checks after a step; expect: node -> tree it must run."""
        c = self.cluster()
        ld = self.leader(c)
        reps = [n for n in NODES if n != ld and n in expect]
        up = [n for n in NODES if n in expect]
        # binaries
        got = {n: self.running_build(n) for n in up}
        self.result("binaries", all(got[n] == expect[n] for n in up),
                    ", ".join(f"{n} {got[n]}" + ("" if got[n] == expect[n] else f" (expected {expect[n]})")
                              for n in up))
        guc = {n: self.try_q(n, "SELECT current_setting('checkpoint_sort', true)") for n in up}
        self.result("checkpoint_sort exists only on the series",
                    all((guc[n] is not None) == (expect[n] == "series") for n in up),
                    ", ".join(f"{n} {guc[n] if guc[n] is not None else '(none)'}" for n in up))
        # replication
        rows = self.try_q(ld, "SELECT application_name, state, sync_state FROM pg_stat_replication",
                          one=False) or []
        wr = {n: self.try_q(n, "SELECT status || ' tli ' || received_tli FROM pg_stat_wal_receiver")
              for n in reps}
        self.result("replication: leader streams to every replica, one sync",
                    sum(r[1] == "streaming" for r in rows) >= len(reps) and all(
                        (wr[n] or "").startswith("streaming") for n in reps)
                    and (not reps or any(r[2] == "sync" for r in rows)),
                    f"leader {ld}: " + ", ".join(f"{a} {s}/{y}" for a, s, y in sorted(rows))
                    + "; receivers: " + ", ".join(f"{n} {wr[n]}" for n in reps))
        mark = f"{self.step_no}:{secrets.token_hex(4)}"
        try:
            self.q(ld, "INSERT INTO ha_marker (step) VALUES (%s)", (mark,))
            seen = self.wait(lambda: all(self.try_q(n, "SELECT count(*) FROM ha_marker WHERE step = %s",
                                                    (mark,)) == 1 for n in reps), 30, "marker on replicas")
        except psycopg2.Error as e:
            seen, mark = False, f"{mark}: {e}".strip()
        self.result("a marker row written on the leader is on every replica within 30 s", seen, mark)
        # sort= in the checkpoint-complete lines (CHECKPOINT first, for the timelines too)
        self.check_sort(ld, reps, expect)
        self.check_timelines(ld, reps, c)
        self.check_loss(ld, reps)
        if self.ext:
            self.check_extension(ld, up, expect)

    def check_sort(self, ld, reps, expect):
        self.q(ld, "CHECKPOINT")
        lsn = self.q(ld, "SELECT pg_current_wal_lsn()::text")
        lines = {}
        for n in [ld] + reps:
            if n != ld:
                self.wait(lambda: self.try_q(n, "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (lsn,)),
                          60, f"{n} replayed {lsn}")
                self.q(n, "CHECKPOINT")
            pid = self.q(n, "SELECT pid FROM pg_stat_activity WHERE backend_type = 'checkpointer'")
            lines[n] = None
            try:
                with open(f"{self.run}/{n}/pglog/postgresql.log", errors="replace") as f:
                    for line in f:
                        if re.search(rf"\[{pid}\] LOG:  (checkpoint|restartpoint) complete: ", line):
                            lines[n] = line.rstrip("\n")
            except OSError:
                pass
        ok = all(lines[n] is not None and (bool(re.search(r"; sort=\d+\.\d+ s$", lines[n]))
                                           == (expect[n] == "series")) for n in lines)
        detail = "; ".join(
            f"{n} ({expect[n]}): " + ("no line" if lines[n] is None else
                                      re.sub(r"^.*LOG:  (\w+) complete: .*?(; sort=.*)?$",
                                             lambda m: m.group(1) + " complete"
                                             + (m.group(2) or " without sort="), lines[n]))
            for n in lines)
        self.result("'; sort=' ends the checkpoint/restartpoint line exactly where the series runs", ok, detail)

    def check_timelines(self, ld, reps, c):
        tls = {ld: self.try_q(ld, "SELECT timeline_id FROM pg_control_checkpoint()")}
        for n in reps:
            tls[n] = self.try_q(n, "SELECT received_tli FROM pg_stat_wal_receiver")
        # Patroni publishes a member's timeline once per loop_wait
        self.wait(lambda: all(self.cluster().get(n, {}).get("timeline") == self.tl for n in tls),
                  3 * LOOP_WAIT, "Patroni's timelines")
        c = self.cluster()
        pat = {n: c.get(n, {}).get("timeline") for n in tls}
        hist = ""
        hist_ok = True
        if self.tl > 1:
            try:
                h = self.q(ld, "SELECT pg_read_file(%s)", (f"pg_wal/{self.tl:08X}.history",))
                entries = [x for x in h.splitlines() if x.strip() and not x.startswith("#")]
                hist_ok = len(entries) == self.tl - 1
                hist = f"; {self.tl:08X}.history: " + " | ".join(" ".join(e.split()[:2]) for e in entries)
            except psycopg2.Error as e:
                hist_ok, hist = False, f"; history file: {str(e).strip()}"
        self.result(f"timelines: every node on TL {self.tl} (pg_control/wal receiver and Patroni)",
                    all(tls[n] == self.tl for n in tls) and all(pat[n] == self.tl for n in pat)
                    and hist_ok,
                    ", ".join(f"{n} {tls[n]}/{pat[n]}" for n in tls) + hist)

    def check_loss(self, ld, reps, final=False):
        acked = self.acked()
        lsn = self.q(ld, "SELECT pg_current_wal_lsn()::text")
        lost = {}
        for n in [ld] + reps:
            if n != ld:
                self.wait(lambda: self.try_q(n, "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (lsn,)),
                          60, f"{n} replayed {lsn}")
            have = {r[0] for r in self.q(n, "SELECT id FROM ha_load", one=False)}
            lost[n] = sorted(set(acked) - have)
        doubt = self.doubt()
        self.result(("final: " if final else "") + "zero loss: every acknowledged commit is on every node",
                    acked and not any(lost.values()),
                    f"{len(acked)} acked, " + ", ".join(
                        f"{n} missing {len(lost[n])}" + (f" (e.g. {lost[n][:5]})" if lost[n] else "")
                        for n in lost) + f"; {len(doubt)} in doubt so far")
        return acked, doubt

    def check_extension(self, ld, up, expect):
        for n in up:
            ver = self.try_q(n, "SELECT extversion FROM pg_extension WHERE extname = 'pg_checkpoint_stats'")
            res = {}
            for view in ("pg_checkpoint_stats", "pg_stat_progress_checkpoint"):
                try:
                    rows = self.q(n, f"SELECT * FROM {view}", one=False)
                    res[view] = (None, f"{len(rows)} row(s)")
                except psycopg2.Error as e:
                    res[view] = (e.pgcode, str(e).strip().splitlines()[0])
            if expect[n] == "series":
                self.result(f"{n} (series): pg_checkpoint_stats {ver} answers", ver and all(
                    code is None for code, _ in res.values()),
                    "; ".join(f"{v}: {m}" for v, (_, m) in res.items()))
            else:
                self.result(f"{n} (stock): the extension's objects are there (replicated), "
                            f"its queries fail without breaking the node",
                            ver and res["pg_checkpoint_stats"][0] == "58P01"
                            and res["pg_stat_progress_checkpoint"][0] is not None,
                            "; ".join(f"{v}: {code} {m}" for v, (code, m) in res.items()))

    def check_progress(self, ld):
        """pg_stat_progress_checkpoint shows a running checkpoint on the
        (series) leader: a spread checkpoint (pg_backup_start(fast =>
        false)) over freshly dirtied pages, watched, then hurried with an
        immediate CHECKPOINT."""
        self.q(ld, "UPDATE ha_pad SET i = i")
        cb = self.conn(ld)
        done = threading.Event()
        err = []

        def backup():
            try:
                cb.cursor().execute("SELECT pg_backup_start('ha-check', false)")
            except psycopg2.Error as e:
                err.append(str(e).strip())
            done.set()
        t = threading.Thread(target=backup, daemon=True)
        t.start()
        seen = self.wait(lambda: self.try_q(
            ld, "SELECT format('%s (%s), phase %s, %s of %s buffers processed, %s write I/Os', type, "
                "flags, phase, buffers_processed, buffers_total, write_ios) FROM pg_stat_progress_checkpoint "
                "WHERE phase = 'writing dirty buffers' AND buffers_total > 0"), 30,
            "a row in pg_stat_progress_checkpoint", interval=0.05)
        self.q(ld, "CHECKPOINT")
        done.wait(60)
        try:
            if not err:
                cb.cursor().execute("SELECT pg_backup_stop(false)")
        except psycopg2.Error as e:
            err.append(str(e).strip())
        cb.close()
        self.result(f"{ld}: pg_stat_progress_checkpoint shows a running (spread) checkpoint",
                    seen and not err, seen or "; ".join(err) or "no row within 30 s")

    # ---------------------------------------------------------- operations
    def patronictl(self, *args, timeout=180):
        cmd = ["/usr/bin/patronictl", "-c", f"{self.tmp}/n1.yml"] + list(args)
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
            out = (r.stdout + r.stderr).strip()
            with open(f"{self.run}/patronictl.log", "a") as f:
                f.write(f"[{now()}] patronictl {' '.join(args)} -> {r.returncode}\n{out}\n")
            return r.returncode, out
        except subprocess.TimeoutExpired:
            return None, f"timeout after {timeout} s"

    def roll(self, n, tree, expect_fail=False):
        """Point n at tree and restart it through patronictl; wait until it
        runs the new binary (and streams, if a replica).  Returns True if it
        does; a node that does not come back is reported."""
        before = self.running_build(n)
        self.link(n, tree)
        log(f"{n}: bin -> {self.trees[tree]}/bin ({before} -> {tree}); patronictl restart {SCOPE} {n} --force")
        t0 = time.time()
        rc, out = self.patronictl("restart", SCOPE, n, "--force")
        last = [l for l in out.splitlines() if l.strip()]
        log(f"{n}: patronictl exit {rc}: {last[-1] if last else ''}")
        if expect_fail:
            return rc, out
        ok = self.wait(lambda: self.running_build(n) == tree and self.cluster().get(n, {}).get(
            "state") == "running" and (self.leader() == n or self.streaming(n)), 120,
            f"{n} running {tree}")
        if ok:
            log(f"{n}: runs {tree} ({time.time() - t0:.1f} s)")
        else:
            st = self.cluster().get(n, {}).get("state")
            self.result(f"{n} restarted on {tree}", False,
                        f"{n} does not run {tree} after 120 s: running {self.running_build(n)}, "
                        f"Patroni state {st!r}; patronictl: {last[-1] if last else ''}")
        return ok

    def switchover(self, what):
        # after a restart the sync standby may be changing: wait for one
        self.wait(lambda: self.healthy() and self.sync_standby(), 60, "a sync standby")
        c = self.cluster()
        ld, cand = self.leader(c), self.sync_standby(c)
        if not (ld and cand):
            raise RuntimeError(f"no leader or no sync standby to switch over to: {c}")
        log(f"switchover {ld} -> {cand} (the sync standby; Patroni 3.0.2 in synchronous_mode "
            f"switches over only to it)")
        t0 = time.time()
        rc, out = self.patronictl("switchover", SCOPE, "--leader", ld, "--candidate", cand, "--force",
                                  timeout=240)
        last = [l for l in out.splitlines() if l.strip()]
        log(f"patronictl exit {rc}: {last[-1] if last else ''}")
        new = self.wait(lambda: self.leader() == cand and cand, 120, f"{cand} leader", interval=0.2)
        t_new = time.time() - t0
        ok = self.wait(lambda: self.healthy(cand), 180, f"{ld} streaming from {cand}")
        if new:
            self.tl += 1
        acks, gap = self.gap(t0)
        self.switchovers.append((what, ld, cand, t_new, gap))
        self.result(f"switchover {ld} -> {cand}: {cand} leads, {ld} follows",
                    new and ok, f"new leader after {t_new:.1f} s, cluster healthy after "
                    f"{time.time() - t0:.1f} s, longest write gap {gap:.1f} s; patronictl exit {rc}")
        res, base, waldump = self.rewind_report(ld, "switchover")
        self.result(f"{ld} rejoined without a base backup", res in ("rewound", "no rewind required", "not run")
                    and not base, f"pg_rewind {res}" + (
                        " (Patroni 3.0.2 could not parse PG 18's pg_waldump message, so it could not "
                        "tell that the shutdown checkpoint was the fork point)" if waldump else ""))
        return ld, cand

    def patroni_entries(self, n, since):
        """n's Patroni log entries (a timestamped line and the lines that
        continue it) at or after the time since."""
        t = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(since))
        entries = []
        for line in self.patroni_log(n).splitlines():
            if re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ ", line):
                entries.append(line)
            elif entries:
                entries[-1] += "\n" + line
        return [e for e in entries if e[:19] >= t]

    def rewind_report(self, n, what):
        """What Patroni did about n's divergence since the step began:
        "rewound" (pg_rewind: Done!), "no rewind required" (pg_rewind ran and
        found nothing to do), "not run", or "FAILED"; and whether it took a
        base backup instead."""
        es = [e for e in self.patroni_entries(n, self.step_t0) if re.search(
            r"rewind|basebackup|bootstrap from|crash recovery|single-user|pg_waldump|Local timeline", e)]
        text = "\n".join(es)
        if "pg_rewind: Done!" in text:
            res = "rewound"
        elif "no rewind required" in text:
            res = "no rewind required"
        elif re.search(r"pg_rewind exit code=[^0]|Failed to rewind", text):
            res = "FAILED"
        else:
            res = "not run"
        base = bool(re.search(r"basebackup|bootstrap from", text))
        waldump = "Failed to parse pg_waldump output" in text
        if res == "rewound":
            self.rewound.append((self.step_no, n, what))
        log(f"  {n} after {what}: pg_rewind {res}" + ("; a base backup!" if base else "")
            + ("; Patroni could not parse pg_waldump's message (PG 16+), so it ran pg_rewind to find out"
               if waldump else ""))
        for e in es[-6:]:
            log("    " + e[:300].replace("\n", "\n      "))
        return res, base, waldump

    # --------------------------------------------------------------- steps
    def bootstrap(self):
        self.begin(0, "bootstrap: etcd, 3 nodes on stock, load")
        self.start_etcd()
        self.start_patroni("n1")
        ok = self.wait(lambda: self.leader() == "n1" and self.try_q("n1", "SELECT 1") == 1, 120,
                       "n1 bootstrapped (initdb) and leading")
        self.result("n1 bootstrapped (initdb) and leads", ok,
                    self.try_q("n1", "SELECT version()") or "no answer")
        if not ok:
            raise RuntimeError("n1 did not bootstrap: see " + f"{self.run}/n1/patroni.log")
        self.q("n1", "CREATE TABLE ha_load (id bigint PRIMARY KEY, worker int NOT NULL, port int NOT NULL, "
                     "ts timestamptz NOT NULL DEFAULT clock_timestamp())")
        self.q("n1", "CREATE TABLE ha_marker (step text PRIMARY KEY, ts timestamptz DEFAULT clock_timestamp())")
        self.q("n1", "CREATE TABLE ha_pad (i int, pad text)")
        self.q("n1", "INSERT INTO ha_pad SELECT i, repeat('x', 700) FROM generate_series(1, 12000) i")
        for n in ("n2", "n3"):
            self.start_patroni(n)
        ok = self.wait(lambda: self.healthy("n1"), 180, "n2, n3 streaming")
        self.result("n2, n3 created by pg_basebackup, streaming", ok,
                    ", ".join(f"{n} {m['role']} {m['state']}" for n, m in sorted(self.cluster().items())))
        if not ok:
            raise RuntimeError("replicas did not start: see their patroni.log")
        self.start_load()
        ok = self.wait(lambda: len(self.acked()) >= 20, 30, "the load's first 20 acks")
        self.result(f"load running ({RATE:g} commits/s, 2 workers)", ok, f"{len(self.acked())} acked")
        self.check_state({n: "stock" for n in NODES})
        self.end()

    def broken_step(self):
        n = "n2"
        self.begin(1, f"{n} -> a bin dir whose postgres exits 1 (deliberate failure)")
        ld0 = self.leader()
        t0 = time.time()
        rc, out = self.roll(n, "broken", expect_fail=True)
        # Patroni retries the start every loop_wait; watch for two rounds
        time.sleep(2 * LOOP_WAIT + 2)
        m = self.cluster().get(n, {})
        down = self.running_build(n) is None
        last = [l for l in out.splitlines() if l.strip()]
        self.result(f"{n} with new binaries that do not start is reported failed, not hidden", down and (
            m.get("state") != "running" or "fail" in out.lower()),
            f"postmaster {'not running' if down else 'RUNNING ' + str(self.running_build(n))}; Patroni state "
            f"{m.get('state')!r}; patronictl exit {rc}: {last[-1] if last else ''}")
        plog = [l for l in self.patroni_log(n).splitlines()
                if l[:19] >= time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t0))
                and re.search(r"fail|FATAL|ERROR|start", l)]
        for l in plog[-5:]:
            log(f"    {n} patroni.log: {l[:200]}")
        others = [x for x in NODES if x != n]
        acks, gap = self.gap(t0)
        serving = self.healthy(ld0, nodes=others)
        self.result("the cluster keeps serving on the others (leader unchanged, replica streaming, "
                    "commits acknowledged)", serving and acks > 0 and self.leader() == ld0,
                    f"leader {self.leader()}, {acks} commits acked while {n} was down, longest gap "
                    f"{gap:.1f} s, sync standby {self.sync_standby()}")
        self.check_loss(ld0, [x for x in others if x != ld0])
        self.end()

        self.begin(2, f"{n} restored: its bin dir -> series (stock primary, mixed replicas)")
        # Patroni retries the start every loop_wait: once the link names a
        # tree that starts, it comes back by itself; patronictl restart if not
        self.link(n, "series")
        log(f"{n}: bin -> {self.trees['series']}/bin; Patroni retries the start every loop_wait")
        t0 = time.time()
        ok = self.wait(lambda: self.running_build(n) == "series" and self.streaming(n), 3 * LOOP_WAIT,
                       f"{n} started by Patroni on series")
        how = f"Patroni started it by itself after {time.time() - t0:.1f} s"
        if not ok:
            ok = self.roll(n, "series")
            how = "after patronictl restart"
        self.result(f"{n} back on the series after the failed start", ok, how)
        self.check_state({"n1": "stock", "n2": "series", "n3": "stock"})
        self.end()

    def run_steps(self):
        self.bootstrap()
        self.broken_step()

        self.begin(3, "n3 -> series (stock primary, series replicas)")
        self.roll("n3", "series")
        exp = {"n1": "stock", "n2": "series", "n3": "series"}
        self.check_state(exp)
        self.end()

        self.begin(4, "switchover to an upgraded replica (series primary, stock replica)")
        old, new = self.switchover("roll-in")
        self.check_state(exp)
        self.end()

        self.begin(5, "CREATE EXTENSION pg_checkpoint_stats (series primary, stock replica)")
        ld = self.leader()
        self.q(ld, "CREATE EXTENSION pg_checkpoint_stats")
        self.ext = True
        log(f"{ld}: CREATE EXTENSION pg_checkpoint_stats")
        self.check_state(exp)
        self.end()

        self.begin(6, f"{old} -> series (all series)")
        self.roll(old, "series")
        exp = {n: "series" for n in NODES}
        self.check_state(exp)
        self.check_progress(self.leader())
        self.end()

        self.begin(7, {"crash": "failover: Patroni killed, old primary diverged and crashed, rewound",
                       "restart": "failover: Patroni killed, restarted beside its running primary",
                       "stop": "failover: Patroni stopped (SIGSTOP) past ttl, continued"}.get(
                           env("HA_FAILOVER", "crash"), "failover"))
        self.failover_rewind(exp)
        self.end()

        ld = self.leader()
        reps = sorted(n for n in NODES if n != ld)
        self.begin(8, f"{reps[0]} -> stock (series primary, mixed replicas)")
        self.roll(reps[0], "stock")
        exp[reps[0]] = "stock"
        self.check_state(exp)
        self.end()

        self.begin(9, f"{reps[1]} -> stock (series primary, stock replicas)")
        self.roll(reps[1], "stock")
        exp[reps[1]] = "stock"
        self.check_state(exp)
        self.end()

        self.begin(10, "switchover to a stock replica; DROP EXTENSION on the stock primary")
        old, new = self.switchover("roll-back")
        self.check_state(exp)
        try:
            self.q(new, "DROP EXTENSION pg_checkpoint_stats")
            self.ext = False
            gone = self.wait(lambda: all(self.try_q(
                n, "SELECT count(*) FROM pg_extension WHERE extname = 'pg_checkpoint_stats'") == 0
                for n in NODES), 30, "extension dropped everywhere")
            self.result(f"DROP EXTENSION pg_checkpoint_stats on the stock primary {new}, replayed", gone, "")
        except psycopg2.Error as e:
            self.result(f"DROP EXTENSION pg_checkpoint_stats on the stock primary {new}", False, str(e).strip())
        self.end()

        self.begin(11, f"{old} -> stock (all stock)")
        self.roll(old, "stock")
        exp[old] = "stock"
        self.check_state(exp)
        self.end()

        self.begin(12, "the load stops; final checks")
        self.stop_load()
        ld = self.leader()
        acked, doubt = self.check_loss(ld, [n for n in NODES if n != ld], final=True)
        per = []
        for i, (port, t) in sorted(self.acked().items(), key=lambda kv: kv[1][1]):
            node = [n for n in NODES if PG_PORT[n] == port][0]
            if not per or per[-1][0] != node:
                per.append([node, 0])
            per[-1][1] += 1
        leaders = ["n1"] + [b for _, _, b, _, _ in self.switchovers]
        self.result("acknowledged commits in every leader epoch, in order",
                    [n for n, _ in per] == leaders, " -> ".join(f"{n} {k}" for n, k in per))
        present = {r[0] for r in self.q(ld, "SELECT id FROM ha_load", one=False)}
        dpresent = sorted(i for i in doubt if i in present)
        log(f"in doubt: {len(doubt)} commits ended in an error or a sync-cancel warning; "
            f"{len(dpresent)} of them are on the final primary (committed after all), "
            f"{len(doubt) - len(dpresent)} are not")
        for i, (t, why) in sorted(doubt.items())[:12]:
            log(f"    id {i} at {time.strftime('%H:%M:%S', time.localtime(t))}: "
                f"{'present' if i in present else 'absent'}; {why.split(chr(92))[0][:120]}")
        sysids = {n: self.try_q(n, "SELECT system_identifier::text FROM pg_control_system()") for n in NODES}
        self.result("one system identifier on all nodes (no node re-initialized)", len(set(sysids.values())) == 1,
                    ", ".join(f"{n} {s}" for n, s in sysids.items()))
        self.end()

    def failover_rewind(self, exp):
        """A failover that needs pg_rewind.  The leader's Patroni goes away
        while its PostgreSQL keeps running as a primary; once the leader key
        expires (ttl) the sync standby takes over, and the old primary's
        commits wait for a sync standby that is gone (never acknowledged).
        HA_FAILOVER selects how the old primary comes back:
          crash (default): Patroni is killed (SIGKILL); after the failover a
            row is committed on the old primary with synchronous_commit =
            local (it diverges for certain), the old primary stops as in a
            crash (SIGQUIT: immediate, no shutdown checkpoint), and Patroni
            starts again: crash recovery in single-user mode, then pg_rewind;
            the orphan row must be gone everywhere.
          restart: Patroni is killed and started again while its PostgreSQL
            still runs as a primary.  Patroni 3.0.2, joining a running
            primary, rewrites postgresql.conf without synchronous_standby_
            names and reloads before it looks at the leader key: the commits
            waiting for the lost sync standby are acknowledged, then the
            node is demoted and rewound: acknowledged commits are lost (the
            check reports it).
          stop: Patroni is stopped (SIGSTOP) and continued (SIGCONT); with
            patroni 3.0.2 and etcd3 the continued Patroni can take the
            leader key back from the new leader when the stop caught it
            inside its leader-key update (patroni#2689, fixed in 3.0.3)."""
        mode = env("HA_FAILOVER", "crash")
        c = self.cluster()
        ld, sync = self.leader(c), self.sync_standby(c)
        p = self.procs[ld]
        t0 = time.time()
        log(f"HA_FAILOVER={mode}: {'SIGSTOP' if mode == 'stop' else 'SIGKILL'} {ld}'s Patroni (pid {p.pid}); "
            f"its postgres keeps running as a primary whose commits wait for the sync standby {sync}, which "
            f"takes over when the leader key expires (ttl {TTL} s)")
        if mode == "stop":
            os.kill(p.pid, signal.SIGSTOP)
        else:
            p.kill()
            p.wait()
        self.stopped.add(ld)
        new = self.wait(lambda: (self.leader() not in (ld, None)) and self.leader(), TTL + 3 * LOOP_WAIT + 30,
                        "a new leader", interval=0.5)
        t_new = time.time() - t0
        blocked = self.try_q(ld, "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'")
        log(f"new leader {new} after {t_new:.1f} s; {ld}'s postgres still runs as a primary, {blocked} "
            f"session(s) waiting for sync replication")
        orphan = None
        if mode == "crash":
            orphan = f"orphan:{secrets.token_hex(4)}"
            c1 = psycopg2.connect(host=HOST, port=PG_PORT[ld], user="postgres", dbname="postgres",
                                  connect_timeout=5, options="-c synchronous_commit=local")
            c1.autocommit = True
            c1.cursor().execute("INSERT INTO ha_marker (step) VALUES (%s)", (orphan,))
            c1.close()
            pid = self.postmaster_pid(ld)
            log(f"{ld}: committed {orphan} locally (diverged); postmaster {pid} stopped as in a crash (SIGQUIT)")
            os.kill(pid, signal.SIGQUIT)
            self.wait(lambda: not os.path.exists(f"/proc/{pid}"), 30, f"{ld}'s postmaster gone")
        if mode == "stop":
            os.kill(p.pid, signal.SIGCONT)
        else:
            log(f"{ld}: Patroni started again")
            self.start_patroni(ld)
        self.stopped.discard(ld)
        ok = self.wait(lambda: self.healthy(), 240, f"{ld} back as a replica")
        final = self.leader()
        tl = self.try_q(final, "SELECT timeline_id FROM pg_control_checkpoint()") if final else None
        acks, gap = self.gap(t0)
        self.switchovers.append(("failover", ld, final, t_new, gap))
        if new and final == new:
            self.tl += 1
        elif final:
            # the leader key went back to the old leader (HA_FAILOVER=stop,
            # patroni#2689): the rest of the run follows what happened
            self.q(final, "CHECKPOINT")
            self.tl = self.q(final, "SELECT timeline_id FROM pg_control_checkpoint()")
        self.result(f"failover {ld} -> {new} (the sync standby {sync}); {ld} follows again",
                    new == sync and final == new and ok,
                    f"new leader after {t_new:.1f} s, healthy after {time.time() - t0:.1f} s, longest write "
                    f"gap {gap:.1f} s" + ("" if final == new else
                                          f"; but {final} leads now (TL {tl}): the leader key was taken back"))
        res, base, _ = self.rewind_report(ld, "failover")
        others = [n for n in NODES if n != ld]
        rep = {n: self.rewind_report(n, "failover (a replica then)") for n in others}
        self.result(f"{ld} rejoined through pg_rewind, without a base backup", res == "rewound" and not base
                    and not any(r[1] for r in rep.values()),
                    f"{ld}: pg_rewind {res}{'; base backup' if base else ''}; " + "; ".join(
                        f"{n}: pg_rewind {r[0]}{'; base backup' if r[1] else ''}" for n, r in rep.items()))
        if orphan:
            where = [n for n in NODES if self.try_q(n, "SELECT count(*) FROM ha_marker WHERE step = %s",
                                                    (orphan,)) != 0]
            self.result(f"the row committed only on the old primary ({orphan}) is gone everywhere (rewound)",
                        not where, f"still on: {', '.join(where)}" if where else "on no node")
        self.check_state(exp)

    # --------------------------------------------------------- measurement
    def measure(self):
        """HA_MEASURE=1 (ha-check.sh sets up the volumes): switchover time,
        stock vs series, each node's data on a loop device of its own,
        throttled like a cloud disk.  One cluster, rolled between the
        trees (all nodes at once, patronictl restart), cycles alternating
        stock and series (HA_MEASURE_CYCLES per build, default 3).  Per
        cycle: a CHECKPOINT, HA_MEASURE_SECONDS (60) of pgbench -R
        HA_MEASURE_TPS (300) on the leader, or HA_MEASURE_SQL instead if set
        (e.g. an UPDATE of a range of pgbench_accounts: a dirty set in
        runs of consecutive blocks, as a bulk load leaves; the same dirty set for both
        builds), then a switchover under the load.  Recorded: the old
        leader's pre-switchover CHECKPOINT (Patroni's demote runs it while
        the primary still takes writes: buffers, write, sync, total) and its
        shutdown checkpoint, from its log; request -> new leader in the DCS
        (polled every 0.1 s) and -> the new leader's "selected new timeline
        ID"; the client's last ack on the old leader, first ack on the new
        one and the worst commit latency; request -> every replica
        streaming again.  Medians per build.  Patroni's own 1 s
        pg_controldata poll quantizes the totals; the CHECKPOINT's duration
        is the sharp number.  Results: bench-results/README.md, section 13."""
        cycles = int(env("HA_MEASURE_CYCLES", "3"))
        secs = int(env("HA_MEASURE_SECONDS", "60"))
        tps = int(env("HA_MEASURE_TPS", "300"))
        scale = int(env("HA_MEASURE_SCALE", "50"))
        self.begin(0, "measurement: bootstrap on the volumes")
        self.start_etcd()
        self.start_patroni("n1")
        if not self.wait(lambda: self.leader() == "n1" and self.try_q("n1", "SELECT 1") == 1, 300, "n1"):
            raise RuntimeError("n1 did not bootstrap")
        self.q("n1", "CREATE TABLE ha_load (id bigint PRIMARY KEY, worker int NOT NULL, port int NOT NULL, "
                     "ts timestamptz NOT NULL DEFAULT clock_timestamp())")
        log(f"pgbench -i -s {scale}")
        self.pgbench("n1", "-i", "-s", str(scale), "-q")
        for n in ("n2", "n3"):
            self.start_patroni(n)
        if not self.wait(lambda: self.healthy("n1"), 900, "replicas"):
            raise RuntimeError("replicas did not start")
        self.start_load()
        self.end()
        rows = []
        order = ["stock", "series"] * cycles
        for k, build in enumerate(order, 1):
            self.begin(k, f"cycle {k}: {build}")
            if any(self.running_build(n) != build for n in NODES):
                for n in NODES:
                    self.link(n, build)
                rc, out = self.patronictl("restart", SCOPE, "--force")
                if not self.wait(lambda: all(self.running_build(n) == build for n in NODES)
                                 and self.healthy(), 600, f"all on {build}"):
                    raise RuntimeError(f"the cluster did not come back on {build}: {out}")
            row = self.measure_switchover(build, secs, tps)
            rows.append(row)
            self.result(f"cycle {k} ({build}): switchover {row['from']} -> {row['to']}", row["ok"],
                        ", ".join(f"{key} {row[key]}" for key in MEASURE_COLS))
            self.end()
        self.measure_report(rows)

    def pgbench(self, n, *args):
        tree = self.running_build(n) or "stock"
        cmd = [f"{self.trees[tree]}/bin/pgbench", "-h", HOST, "-p", str(PG_PORT[n]), "-U", "postgres"] + \
            list(args) + ["postgres"]
        with open(f"{self.run}/pgbench.log", "a") as f:
            f.write(f"[{now()}] {' '.join(cmd)}\n")
            f.flush()
            r = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT)
        if r.returncode:
            raise RuntimeError(f"pgbench {' '.join(args)} failed: {self.run}/pgbench.log")

    def pglog_size(self, n):
        try:
            return os.path.getsize(f"{self.run}/{n}/pglog/postgresql.log")
        except OSError:
            return 0

    def pglog_since(self, n, offset):
        """(epoch, message) of n's server log lines after byte offset."""
        import datetime
        out = []
        try:
            with open(f"{self.run}/{n}/pglog/postgresql.log", "rb") as f:
                f.seek(offset)
                data = f.read().decode(errors="replace")
        except OSError:
            return out
        for line in data.splitlines():
            m = re.match(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) UTC \[\d+\] (.*)", line)
            if m:
                t = datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S.%f").replace(
                    tzinfo=datetime.timezone.utc).timestamp()
                out.append((t, m.group(2)))
        return out

    def measure_switchover(self, build, secs, tps):
        c = self.cluster()
        ld, cand = self.leader(c), self.sync_standby(c)
        self.q(ld, "CHECKPOINT")
        sql = env("HA_MEASURE_SQL", "")
        if sql:
            log(f"{build}: {sql} on {ld}")
            self.q(ld, sql)
        else:
            log(f"{build}: pgbench -R {tps} -T {secs} on {ld}")
            self.pgbench(ld, "-c", "4", "-j", "2", "-R", str(tps), "-T", str(secs), "-n")
        off = {n: self.pglog_size(n) for n in NODES}
        acked0 = set(self.acked())
        t_req = time.time()
        rc, out = self.patronictl("switchover", SCOPE, "--leader", ld, "--candidate", cand, "--force",
                                  timeout=600)
        t_leader = self.wait(lambda: self.leader() == cand and time.time(), 600, f"{cand} leader", interval=0.1)
        healthy = self.wait(lambda: self.healthy(cand) and time.time(), 600, "all streaming")
        time.sleep(2)
        self.tl += 1
        old_log, new_log = self.pglog_since(ld, off[ld]), self.pglog_since(cand, off[cand])

        def first(lines, pat, after=0.0):
            for t, msg in lines:
                if t >= after and re.search(pat, msg):
                    return t, msg
            return None, None
        ck_s, _ = first(old_log, r"checkpoint starting: immediate force wait")
        ck_e, ck_msg = first(old_log, r"checkpoint complete: ", ck_s or 0)
        sd_s, _ = first(old_log, r"checkpoint starting: shutdown")
        sd_e, sd_msg = first(old_log, r"checkpoint complete: ", sd_s or 0)
        promo, _ = first(new_log, r"selected new timeline ID")

        def field(msg, name):
            m = re.search(rf"{name}=([\d.]+) s", msg or "")
            return float(m.group(1)) if m else None
        acks = sorted((t, port, i) for i, (port, t) in self.acked().items() if i not in acked0)
        last_old = max((t for t, port, _ in acks if port == PG_PORT[ld]), default=None)
        first_new = min((t for t, port, _ in acks if port == PG_PORT[cand]), default=None)
        lat = max((float(p[3]) for p in self.load_records("acked-")
                   if len(p) == 4 and float(p[2]) >= t_req), default=0.0)

        def rel(t):
            return round(t - t_req, 2) if t else None
        m = re.search(r"wrote (\d+) buffers", ck_msg or "")
        return {"build": build, "from": ld, "to": cand, "ok": bool(t_leader and healthy and ck_msg),
                "ckpt_buffers": int(m.group(1)) if m else None, "ckpt_write": field(ck_msg, "write"),
                "ckpt_sync": field(ck_msg, "sync"), "ckpt_total": field(ck_msg, "total"),
                "ckpt_start": rel(ck_s), "shutdown_ckpt_total": field(sd_msg, "total"),
                "new_leader": rel(t_leader), "promoted": rel(promo),
                "write_gap": round(first_new - last_old, 2) if first_new and last_old else None,
                "worst_commit": round(lat, 2), "all_streaming": rel(healthy), "patronictl_rc": rc}

    def measure_report(self, rows):
        import statistics
        out = ["", "switchover measurement (seconds from the request unless noted; ckpt: the old leader's "
               "pre-switchover CHECKPOINT)", ""]
        hdr = f"{'build':<7} {'from':<4} {'to':<4} " + " ".join(f"{c:>13}" for c in MEASURE_COLS)
        out += [hdr, "-" * len(hdr)]
        for r in rows:
            out.append(f"{r['build']:<7} {r['from']:<4} {r['to']:<4} " + " ".join(
                f"{'-' if r[c] is None else r[c]:>13}" for c in MEASURE_COLS))
        out.append("")
        for b in ("stock", "series"):
            med = []
            for c in MEASURE_COLS:
                v = [r[c] for r in rows if r["build"] == b and r[c] is not None]
                med.append(f"{statistics.median(v):>13.2f}" if v else f"{'-':>13}")
            out.append(f"{b:<7} {'median':<9} " + " ".join(med))
        text = "\n".join(out)
        print(text, flush=True)
        with open(f"{self.run}/measure.txt", "w") as f:
            f.write(text + "\n")

    # ------------------------------------------------------------ teardown
    def stop_load(self):
        p = self.procs.get("load")
        if p and p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def cleanup(self):
        log("cleanup: stopping the load, Patroni (and its PostgreSQL), etcd")
        self.stop_load()
        for n in NODES:
            p = self.procs.get(n)
            if p and p.poll() is None:
                try:
                    os.kill(p.pid, signal.SIGCONT)
                    p.send_signal(signal.SIGTERM)
                except OSError:
                    pass
        end = time.time() + 60
        for n in NODES:
            p = self.procs.get(n)
            if p:
                try:
                    p.wait(max(1, end - time.time()))
                except subprocess.TimeoutExpired:
                    log(f"{n}: Patroni did not stop in 60 s: SIGKILL")
                    p.kill()
                    p.wait()
        # a postmaster Patroni left behind (killed Patroni, failed stop)
        for n in NODES:
            pid = self.postmaster_pid(n)
            if pid:
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        mine = self.data_dir(n).encode() in f.read()
                except OSError:
                    mine = False
                if mine:
                    log(f"{n}: postmaster {pid} still running: SIGQUIT")
                    os.kill(pid, signal.SIGQUIT)
                    for _ in range(50):
                        if not os.path.exists(f"/proc/{pid}"):
                            break
                        time.sleep(0.2)
                    else:
                        os.kill(pid, signal.SIGKILL)
        p = self.procs.get("etcd")
        if p and p.poll() is None:
            p.terminate()
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for name in list(self.procs):
            try:
                os.unlink(f"{self.run}/pids/{name}.pid")
            except OSError:
                pass
        if not KEEP:
            for n in NODES:
                shutil.rmtree(self.data_dir(n), ignore_errors=True)
            shutil.rmtree(f"{self.run}/etcd", ignore_errors=True)
        if self.tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)
            try:
                os.unlink(f"{self.run}/tmpdir")
            except OSError:
                pass

    # ------------------------------------------------------------- summary
    def summary(self, status):
        out = []
        out.append(f"make ha-check: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(T0))}, "
                   f"{time.time() - T0:.0f} s; {status}")
        out.append(f"series {self.trees['series']}, stock {self.trees['stock']}; patroni "
                   f"{patroni_version()}, etcd 3.4 (etcd3 API); ttl {TTL}, loop_wait {LOOP_WAIT}, "
                   f"synchronous_mode; load {RATE:g} commits/s")
        out.append("")
        hdr = f"{'#':>2}  {'step':<68} {'n1':<11} {'n2':<11} {'n3':<11} {'TL':>2} {'acked':>6} " \
              f"{'gap s':>5} {'checks':>6} {'s':>4}"
        out.append(hdr)
        out.append("-" * len(hdr))
        for s in self.steps:
            out.append(f"{s['no']:>2}  {s['name'][:68]:<68} {s['state']['n1']:<11} {s['state']['n2']:<11} "
                       f"{s['state']['n3']:<11} {s['tl']:>2} {s['acks']:>6} {s['gap']:>5.1f} "
                       f"{str(s['ok']) + '/' + str(s['n']):>6} {s['secs']:>4.0f}")
        out.append("")
        out.append("L leader, S sync standby, R replica; acked: commits acknowledged during the step; "
                   "gap: the longest time without one")
        if self.switchovers:
            out.append("")
            out.append("leader changes: " + "; ".join(
                f"{w} {a} -> {b}: new leader after {t:.1f} s, write gap {g:.1f} s"
                for w, a, b, t, g in self.switchovers))
        if self.rewound:
            out.append("pg_rewind: " + "; ".join(f"step {s}: {n} ({w})" for s, n, w in self.rewound))
        fails = [r for r in self.results if not r[2]]
        if fails:
            out.append("")
            out.append("FAILED:")
            for s, c, _, d in fails:
                out.append(f"  step {s}: {c}: {d}")
        passed = sum(r[2] for r in self.results)
        out.append("")
        out.append(f"ha-check: {passed} passed, {len(fails)} failed, {time.time() - T0:.0f} s "
                   f"(logs: {self.run})")
        text = "\n".join(out)
        print("\n" + text, flush=True)
        with open(f"{self.run}/summary.txt", "w") as f:
            f.write(text + "\n")
        with open(f"{self.run}/results.tsv", "w") as f:
            for s, c, ok, d in self.results:
                f.write(f"{s}\t{'pass' if ok else 'FAIL'}\t{c}\t{d}\n")
        return not fails and status == "completed"


MEASURE_COLS = ("ckpt_buffers", "ckpt_write", "ckpt_sync", "ckpt_total", "ckpt_start", "shutdown_ckpt_total",
                "new_leader", "promoted", "write_gap", "worst_commit", "all_streaming")


def patroni_version():
    try:
        from patroni.version import __version__
        return __version__
    except ImportError:
        return "?"


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "load":
        return load_main(sys.argv[2:])
    # ^C, also when started with SIGINT ignored (a background job)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGHUP, on_term)
    chk = Check()
    status = "completed"
    try:
        chk.prepare()
        log(f"series {chk.trees['series']}, stock {chk.trees['stock']}, run directory {chk.run}")
        if len(sys.argv) > 1 and sys.argv[1] == "measure":
            if not MEASURE_MNT:
                sys.exit("measure: HA_MEASURE_MNT (the volumes) is not set: run make ha-check with HA_MEASURE=1")
            chk.measure()
        else:
            chk.run_steps()
    except (KeyboardInterrupt, Interrupted) as e:
        status = f"INTERRUPTED ({str(e) or 'SIGINT'}) in step {chk.step_no}"
        log(status)
        chk.close_step("INTERRUPTED:")
    except Exception as e:  # noqa: reported, then cleaned up
        import traceback
        traceback.print_exc()
        status = f"ABORTED in step {chk.step_no}: {type(e).__name__}: {e}"
        log(status)
        chk.close_step("ABORTED:")
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        try:
            chk.cleanup()
        finally:
            ok = chk.summary(status) if chk.run and os.path.isdir(chk.run) else False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
