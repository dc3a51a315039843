"""A PostgreSQL cluster for the benchmarks: initdb, pg_ctl and psql of one
installation, listening on localhost only."""

import os
import shutil
import subprocess
import sys


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
