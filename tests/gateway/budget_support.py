"""Real services for the budget tests: a fresh PostgreSQL database, a Redis key prefix of our
own (flushed after), a private redis-server that a test may stop and restart, and a webhook
receiver that fails on purpose."""

from __future__ import annotations

import asyncio
import json
import secrets
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import asyncpg
import pytest
import redis

from tests.support import free_port, wait_until

SHARED_REDIS = "redis://127.0.0.1:6379/5"  # db 5: budget tests; each run uses its own key prefix


def _pg(sql: str) -> None:
    async def run() -> None:
        conn = await asyncpg.connect(host="127.0.0.1", port=5432, user="postgres", database="postgres")
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    asyncio.run(run())


@contextmanager
def fresh_postgres() -> Iterator[str]:
    name = f"costgate_budgets_{secrets.token_hex(4)}"
    try:
        _pg(f'CREATE DATABASE "{name}"')
    except (OSError, asyncpg.PostgresError) as err:
        pytest.skip(f"PostgreSQL on 127.0.0.1:5432 is needed: {err}")
    try:
        yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    finally:
        _pg(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def redis_prefix(url: str = SHARED_REDIS) -> Iterator[str]:
    prefix = f"cgtest:{secrets.token_hex(4)}:"
    client = redis.Redis.from_url(url)
    try:
        client.ping()
    except redis.RedisError as err:
        pytest.skip(f"Redis on {url} is needed: {err}")
    try:
        yield prefix
    finally:
        keys = list(client.scan_iter(match=prefix + "*", count=1000))
        if keys:
            client.delete(*keys)
        client.close()


class OwnRedis:
    """A redis-server of this test's own on a free port, without persistence (a restart
    loses every key, as a crashed cache node would)."""

    def __init__(self, workdir: Path) -> None:
        if shutil.which("redis-server") is None:
            pytest.skip("redis-server is not installed")
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.workdir = workdir
        self.proc: subprocess.Popen | None = None
        self.start()

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.workdir),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = redis.Redis(port=self.port)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                client.ping()
                return
            except redis.ConnectionError:
                time.sleep(0.05)
        raise TimeoutError("redis-server did not start")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


class WebhookReceiver:
    """Records every POST; answers 500 to the first `fail_first` of them."""

    def __init__(self, fail_first: int = 0) -> None:
        self.fail_first = fail_first
        self.attempts: list[dict[str, Any]] = []
        self.accepted: list[dict[str, Any]] = []
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/hook"
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                receiver.attempts.append(body)
                ok = len(receiver.attempts) > receiver.fail_first
                if ok:
                    receiver.accepted.append(body)
                self.send_response(200 if ok else 500)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait_for(self, predicate: Any, timeout: float = 10) -> None:
        wait_until(predicate, timeout, what=f"webhooks {self.accepted}")

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def usd(text: str) -> Decimal:
    return Decimal(text)


def price_cost(prompt_tokens: int, completion_tokens: int, input_per_mtok: str, output_per_mtok: str) -> Decimal:
    """Upstream usage x price, computed independently of the gateway."""
    return (prompt_tokens * Decimal(input_per_mtok) + completion_tokens * Decimal(output_per_mtok)) / Decimal(10**6)
