"""Servers the reliability tests own and may break: the faulty upstream, a redis-server and a
PostgreSQL cluster on free ports. The shared 127.0.0.1:6379 / :5432 servers are never stopped."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.gateway.budget_support import OwnRedis  # noqa: F401  (re-exported for these tests)
from tests.support import FakeUpstream, free_port


class FaultyUpstreamProcess(FakeUpstream):
    """tests/fakes/faulty_upstream.py in its own process."""

    def __init__(self, log_dir: Path) -> None:
        super().__init__(log_dir, "tests.fakes.faulty_upstream")


class OwnPostgres:
    """A throwaway PostgreSQL cluster (initdb) on a free port, trust auth, database `test`."""

    def __init__(self) -> None:
        bins = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
        if not bins:
            pytest.skip("PostgreSQL server binaries are not installed")
        self.bin = Path(bins[-1]).parent
        self.port = free_port()
        # Outside pytest's private (0700) temp tree, which the `postgres` user cannot enter.
        self.base = Path(tempfile.mkdtemp(prefix="cg-pg-"))
        self.dir, self.sock = self.base / "data", self.base / "sock"
        for d in (self.dir, self.sock):
            d.mkdir()
        self._as_root = os.geteuid() == 0  # initdb refuses root: run it as `postgres`
        if self._as_root:
            os.chmod(self.base, 0o755)
            for d in (self.dir, self.sock):
                shutil.chown(d, "postgres")
        self._run("initdb", "-D", str(self.dir), "-A", "trust", "-U", "postgres", "--no-sync")
        self.start()
        self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "test")
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/test"

    def _run(self, tool: str, *args: str) -> None:
        cmd = [str(self.bin / tool), *args]
        if self._as_root:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{tool} failed: {done.stdout.decode(errors='replace')[-2000:]}")

    def start(self) -> None:
        self._run(
            "pg_ctl",
            "-D",
            str(self.dir),
            "-w",
            "-l",
            str(self.dir / "server.log"),
            "-o",
            f"-p {self.port} -k {self.sock} -c listen_addresses=127.0.0.1 -c fsync=off",
            "start",
        )

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.dir), "-w", "-m", "immediate", "stop")

    def destroy(self) -> None:
        try:
            self.stop()
        except RuntimeError:
            pass  # already stopped
        shutil.rmtree(self.base, ignore_errors=True)
