"""Real processes for tests: the fake upstream and the gateway, each on a free port."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx
import openai
import uvicorn
import yaml

ADMIN_KEY = "sk-cg-admin-test-0123456789abcdef"
ROOT = Path(__file__).resolve().parent.parent
T = TypeVar("T")


def wait_until(condition: Callable[[], T], timeout: float = 30.0, interval: float = 0.02, what: str = "") -> T:
    """Wait for something to happen: poll `condition` until it returns a true value, and return
    that value; fail with TimeoutError after `timeout` seconds. A deadline, never a fixed sleep:
    the test goes on as soon as the condition holds, and fails loudly when it never does."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"not reached in {timeout} s: {what or condition}")
        time.sleep(interval)


async def wait_until_async(
    condition: Callable[[], T], timeout: float = 30.0, interval: float = 0.005, what: str = ""
) -> T:
    """`wait_until` for a test on the event loop: polls between the loop's other work."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"not reached in {timeout} s: {what or condition}")
        await asyncio.sleep(interval)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ThreadServer:
    """An ASGI app served by uvicorn on a free local port, in a thread of this process: for a
    client that makes its own connections (litellm, `costgate reconcile`, a Batch API poller)."""

    def __init__(self, app: Any, timeout: float = 20.0) -> None:
        port = free_port()
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        wait_until(lambda: self.server.started, timeout, what=f"uvicorn on port {port}")
        self.base = f"http://127.0.0.1:{port}"

    def stop(self, timeout: float = 5.0) -> None:
        self.server.should_exit = True
        self.thread.join(timeout)


def wait_http(url: str, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before serving {url}")
        try:
            if httpx.get(url, timeout=1).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"{url} did not come up in {timeout} s")


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update({"PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    env.update(extra or {})
    return env


class FakeUpstream:
    """A fake upstream module (`python -m MODULE --port P ARGS…`) in its own process."""

    def __init__(self, log_dir: Path, module: str = "tests.fakes.fake_openai", args: tuple[str, ...] = ()) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._log = open(log_dir / f"{module.rsplit('.', 1)[-1]}-{self.port}.log", "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", module, "--port", str(self.port), *args],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=_env(),
            cwd=ROOT,
        )
        wait_http(f"http://127.0.0.1:{self.port}/_stats", self.proc)

    def stats(self) -> dict[str, int]:
        return httpx.get(f"http://127.0.0.1:{self.port}/_stats").json()

    def reset(self) -> None:
        httpx.post(f"http://127.0.0.1:{self.port}/_reset")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)
        self._log.close()


def recorded_upstream(workdir: Path, records: list[dict[str, Any]]) -> FakeUpstream:
    """tests/fakes/fake_recorded.py serving `records`: each a prompt and its answer per upstream
    model (a text, or a dict with the content, logprobs, finish_reason)."""
    path = workdir / "answers.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return FakeUpstream(workdir, "tests.fakes.fake_recorded", ("--answers", str(path)))


class GatewayProcess:
    """`costgate serve --config FILE` in its own process, as a user runs it."""

    def __init__(self, config: dict[str, Any], workdir: Path, env: dict[str, str] | None = None) -> None:
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        config = {
            "admin_key": ADMIN_KEY,
            "database_url": f"sqlite:///{workdir}/costgate.db",
            "data_dir": str(workdir / "data"),
            **config,
        }
        self.config = config
        self.config_path = workdir / "config.yaml"
        self.config_path.write_text(yaml.safe_dump(config))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = workdir / f"gateway-{self.port}.log"
        self._env = env
        self.proc: subprocess.Popen | None = None
        self.start()

    def start(self) -> None:
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gateway.cli",
                "serve",
                "--config",
                str(self.config_path),
                "--port",
                str(self.port),
                "--log-level",  # info: the access log's lines, which some tests read (issue 28)
                "info",
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=_env(self._env),
            cwd=self.workdir,
        )
        wait_http(self.url + "/healthz", self.proc)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(20)
        self._log.close()

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(10)
        self._log.close()

    # admin API
    def admin(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        return httpx.request(
            method, self.url + path, headers={"authorization": f"Bearer {ADMIN_KEY}"}, timeout=30, **kwargs
        )

    def new_key(self, team: str = "team-a", **fields: Any) -> str:
        teams = self.admin("GET", "/admin/teams").json()["data"]
        if not any(t["name"] == team for t in teams):
            assert self.admin("POST", "/admin/teams", json={"name": team}).status_code == 200
        response = self.admin("POST", "/admin/keys", json={"team": team, **fields})
        assert response.status_code == 200, response.text
        return response.json()["key"]

    def key_with_budget(self, team: str, amount_usd: str, period: str = "daily") -> str:
        """A new key of `team`, whose team budget is `amount_usd` a `period`."""
        key = self.new_key(team)
        budget = self.admin(
            "PUT", "/admin/budgets", json={"scope": "team", "id": team, "amount_usd": amount_usd, "period": period}
        )
        assert budget.status_code == 200, budget.text
        return key

    def client(self, key: str, **kwargs: Any) -> openai.OpenAI:
        return openai.OpenAI(base_url=self.url + "/v1", api_key=key, max_retries=0, **kwargs)

    def async_client(self, key: str, **kwargs: Any) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(base_url=self.url + "/v1", api_key=key, max_retries=0, **kwargs)

    def spend(self, group_by: str = "team") -> dict[str, Any]:
        return self.admin("GET", f"/admin/spend?group_by={group_by}").json()


def model(
    name: str, upstream: str, api_base: str, input_per_mtok: str = "1.5", output_per_mtok: str = "6", **extra: Any
) -> dict[str, Any]:
    """A config entry for a model served by the fake upstream, at a chosen price."""
    return {
        "name": name,
        "provider": "openai",
        "model": upstream,
        "api_base": api_base,
        "api_key": "fake-key",
        "price": {"input_per_mtok": input_per_mtok, "output_per_mtok": output_per_mtok},
        "tokenizer": "tiktoken",  # the fake counts words, or bills with tiktoken (`bill-*`): never more
        **extra,
    }
