"""How long a request waits for a starting engine (engine/cold_start.py): tables, then the
supervisor against the stand-in server, whose start the test finishes by creating a file."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from engine.cold_start import EngineStarting, expected_remaining, retry_after, wait_bound
from engine.command import LaunchSpec
from engine.config import EngineSettings
from engine.launcher import Replica, State
from tests.engine.test_launcher import STAND_IN, _until


@pytest.mark.parametrize(
    ("last_start", "started_for", "remaining"),
    [
        (None, None, None),
        (None, 3.0, None),  # never measured: no estimate
        (45.0, None, None),  # no start under way
        (45.0, 5.0, 40.0),
        (45.0, 60.0, 0.0),  # a start running longer than the last: due any moment
    ],
)
def test_expected_remaining(last_start: float | None, started_for: float | None, remaining: float | None) -> None:
    assert expected_remaining(last_start, started_for) == remaining


@pytest.mark.parametrize(
    ("remaining", "bound", "wait", "retry"),
    [
        (None, 20.0, 20.0, 20.0),  # no estimate: wait the bound, then retry after another bound
        (10.0, 20.0, 20.0, 10.0),  # due within the bound: wait
        (40.0, 20.0, None, 40.0),  # would exceed it: answer now, retry when it is due
        (0.2, 20.0, 20.0, 1.0),  # retry-after is whole seconds, at least one
        (None, 0.0, 0.0, 1.0),  # a model with fallbacks waits not at all
        (5.0, 0.0, None, 5.0),
    ],
)
def test_wait_bound_and_retry_after(remaining: float | None, bound: float, wait: float | None, retry: float) -> None:
    assert wait_bound(remaining, bound) == wait
    assert retry_after(remaining, bound) == retry


def _gated_replica(tmp_path: Path, gate: Path) -> Replica:
    settings = {
        "health_interval_s": 0.1,
        "warm_up": False,
        "startup_timeout_s": 60,
        "idle_shutdown_s": None,
        "extra_args": ["--stand-in-ready-file", str(gate)],
    }
    return Replica(LaunchSpec("m", "/none", EngineSettings.parse(settings)), tmp_path, cpu=True, server_module=STAND_IN)


async def test_a_request_waits_its_bound_then_gets_a_retry_after_while_the_start_goes_on(tmp_path: Path) -> None:
    gate = tmp_path / "ready"
    replica = _gated_replica(tmp_path, gate)
    try:
        with pytest.raises(EngineStarting) as refused:  # first start: no estimate, so it waited 0.2 s
            await replica.ensure_ready(wait_s=0.2)
        assert refused.value.retry_after_s == 1.0 and "try again in 1 s" in str(refused.value)
        assert replica.state is State.STARTING  # the request gave up; the start did not
        gate.touch()
        url = await replica.ensure_ready(wait_s=30)
        assert replica.state is State.READY and url == replica.base_url and replica.starts == 1
        assert replica.last_start_s is not None and replica.last_start_s > 0
    finally:
        await replica.stop()


async def test_after_a_measured_start_a_wait_that_would_exceed_the_bound_is_refused_at_once(tmp_path: Path) -> None:
    gate = tmp_path / "ready"
    gate.touch()
    replica = _gated_replica(tmp_path, gate)
    try:
        await replica.ensure_ready()
        measured = replica.last_start_s
        assert measured is not None
        await replica.stop()  # as the idle shutdown does
        gate.unlink()
        with pytest.raises(EngineStarting) as refused:  # the last start took longer than the bound
            await replica.ensure_ready(wait_s=measured / 1000)
        assert refused.value.retry_after_s >= 1.0
        waiting = asyncio.create_task(replica.ensure_ready(wait_s=60))  # a bound the start fits in: it waits
        await _until(lambda: replica.state is State.STARTING)
        assert not waiting.done()
        gate.touch()
        assert await waiting == replica.base_url and replica.starts == 2
    finally:
        await replica.stop()


async def test_stopping_while_an_engine_starts_leaves_no_process(tmp_path: Path) -> None:
    replica = _gated_replica(tmp_path, tmp_path / "never")
    with pytest.raises(EngineStarting):
        await replica.ensure_ready(wait_s=0.2)
    await _until(lambda: replica._proc is not None)
    proc = replica._proc
    await replica.stop()
    assert proc.returncode is not None and replica.state is State.STOPPED
