"""What the speed benchmarks share: processes pinned to a core and stopped at the end, wrk
(bench/wrk_post.lua) run pinned beside them, a process's CPU time, and the environment and
model entry a benchmarked gateway runs with.

Used by bench/overhead.py and bench/semantic_cache_speed.py.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
MODEL = "bench-model"
ADMIN_KEY = "sk-cg-admin-bench-0123456789abcdef"
# The benchmark's request, whole and streamed.
BODY = json.dumps(
    {
        "model": MODEL,
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Say hello to the benchmark."},
        ],
    }
)
STREAM_BODY = json.dumps(
    {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Stream hello to the benchmark."}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
).encode()


def bench_model(upstream: str) -> dict:
    """The one model a benchmarked gateway serves: the fast fake upstream, at a fixed price."""
    return {
        "name": MODEL,
        "provider": "openai",
        "model": MODEL,
        "api_base": upstream,
        "api_key": "fake",
        "price": {"input_per_mtok": "1.5", "output_per_mtok": "6"},
    }


@dataclass(frozen=True)
class WrkResult:
    requests: int
    duration_s: float
    p50_ms: float
    p99_ms: float
    errors: int
    non2xx: int

    @property
    def rps(self) -> float:
        return self.requests / self.duration_s


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, proc: subprocess.Popen, timeout: float, headers: dict[str, str] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args!r} exited with {proc.returncode} before serving {url}")
        try:
            if httpx.get(url, timeout=2, headers=headers).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"{url} did not come up in {timeout} s")


class Processes:
    """Every server this run starts, stopped (by its own pid) when the run ends."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.procs: list[subprocess.Popen] = []

    def start(self, name: str, cpu: int, argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen:
        log = open(self.workdir / f"{name}.log", "wb")
        proc = subprocess.Popen(
            ["taskset", "-c", str(cpu), *argv],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
        self.procs.append(proc)
        return proc

    def stop_all(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()


def run_wrk(url: str, key: str, body: str, connections: int, duration_s: float, cpu: int) -> WrkResult:
    """One wrk run pinned to `cpu`, POSTing `body` (a JSON text, or `@FILE` of one body a line,
    cycled through) to `url` with `key` as the bearer."""
    argv = [
        "taskset",
        "-c",
        str(cpu),
        "wrk",
        "-t1",
        f"-c{connections}",
        f"-d{max(1, round(duration_s))}s",
        "--timeout",
        "10s",
        "-s",
        str(BENCH / "wrk_post.lua"),
        url,
        "--",
        key,
        body,
    ]
    done = subprocess.run(argv, capture_output=True, text=True)
    line = next((line for line in done.stdout.splitlines() if line.startswith("BENCH ")), None)
    if done.returncode != 0 or line is None:
        raise RuntimeError(f"wrk failed ({done.returncode}): {done.stderr.strip()[:500]}")
    data = json.loads(line[6:])
    return WrkResult(
        data["requests"],
        data["duration_us"] / 1e6,
        data["p50_us"] / 1000,
        data["p99_us"] / 1000,
        data["errors"],
        data["non2xx"],
    )


def cpu_ms(pid: int) -> float:
    """User + system CPU time of a process and its children so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
    return ticks * 1000 / os.sysconf("SC_CLK_TCK")


def main_thread_cpu_ms(pid: int) -> float:
    """User + system CPU time of a process's main thread so far (its event loop, in a gateway;
    `cpu_ms` less this is what its other threads used)."""
    fields = Path(f"/proc/{pid}/task/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update({"LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONPATH": str(ROOT)})
    return env
