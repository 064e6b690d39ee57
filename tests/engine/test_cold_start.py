"""How long a request waits for a starting engine (engine/cold_start.py): tables, then the
supervisor against the stand-in server, whose start the test finishes by creating a file."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from engine.cold_start import EngineStarting, expected_remaining, retry_after, wait_bound
from engine.command import LaunchSpec
from engine.config import EngineSettings
from engine.first_start import first_start_record, measured_first_start
from engine.launcher import Replica, State
from tests.engine.test_launcher import STAND_IN, _until

pytestmark = pytest.mark.slow  # starts stand-in vLLM processes


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
        (0.2, 20.0, 20.0, 20.0),  # overdue after the wait: the estimate was wrong, retry after the bound
        (1.5, 20.0, 20.0, 1.5),
        (400.0, 20.0, None, 60.0),  # never past 60 s: the SDKs replace a longer one with a short backoff
        (None, 0.0, 0.0, 1.0),  # a model with fallbacks waits not at all
        (5.0, 0.0, None, 5.0),
    ],
)
def test_wait_bound_and_retry_after(remaining: float | None, bound: float, wait: float | None, retry: float) -> None:
    assert wait_bound(remaining, bound) == wait
    assert retry_after(remaining, bound) == retry


def _gated_replica(
    tmp_path: Path, gate: Path, first_start_s: float | None = None, record: Path | None = None
) -> Replica:
    settings = {
        "health_interval_s": 0.1,
        "warm_up": False,
        "startup_timeout_s": 60,
        "idle_shutdown_s": None,
        "extra_args": ["--stand-in-ready-file", str(gate)],
    }
    spec = LaunchSpec("m", "/none", EngineSettings.parse(settings))
    return Replica(
        spec, tmp_path, cpu=True, server_module=STAND_IN, first_start_s=first_start_s, first_start_record=record
    )


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


async def test_a_restart_is_estimated_from_restarts_never_from_the_first_start(tmp_path: Path) -> None:
    """The first start (cold, the bundled model converted first) took 82 s here and a restart
    after an idle shutdown 35 s: a retry-after from the first start sent the SDK away for 47 s
    too long. The first start is estimated from its configured prior, the first restart not at
    all (the request waits its bound), later ones from the last restart."""
    gate = tmp_path / "ready"
    replica = _gated_replica(tmp_path, gate, first_start_s=500.0)
    try:
        with pytest.raises(EngineStarting) as refused:  # the prior says 500 s: no wait, come back in 60
            await replica.ensure_ready(wait_s=20)
        assert refused.value.retry_after_s == 60.0
        await asyncio.sleep(1.0)  # the first start takes a second at least
        gate.touch()
        await replica.ensure_ready()  # (no bound: the prior would refuse it)
        first = replica.last_start_s
        assert first is not None and first >= 1.0 and replica.restart_s is None
        await replica.stop()  # the idle shutdown
        gate.unlink()
        with pytest.raises(EngineStarting):
            await replica.ensure_ready(wait_s=0.2)  # waited its bound: no estimate to refuse at once on
        assert replica.expected_start_remaining() is None
        gate.touch()
        await replica.ensure_ready(wait_s=60)
        restart = replica.restart_s
        assert restart is not None and restart == replica.last_start_s
        await replica.stop()
        gate.unlink()
        replica.start_soon()
        remaining = replica.expected_start_remaining()
        assert remaining is not None and remaining <= restart
        gate.touch()
        await replica.ensure_ready(wait_s=60)
    finally:
        await replica.stop()


async def test_a_process_keeps_its_first_start_for_the_next_processs_estimate(tmp_path: Path) -> None:
    """The bundled model's prior (105 s with its conversion) is for a slow two-core machine; one
    machine was ready in 40 s, and the 503's retry-after sent the SDK away for 47 s too long. The
    first start a process measures is kept, and the next process estimates its own from it."""
    gate, record = tmp_path / "ready", first_start_record(tmp_path, "m")
    assert measured_first_start(record) is None
    first = _gated_replica(tmp_path, gate, first_start_s=500.0, record=record)
    try:
        gate.touch()
        await first.ensure_ready()
        measured = first.last_start_s
        assert measured is not None and measured_first_start(record) == pytest.approx(measured, abs=0.05)
        await first.stop()  # the idle shutdown: a restart is no first start, the record stays
        await first.ensure_ready()
        assert first.starts == 2 and measured_first_start(record) == pytest.approx(measured, abs=0.05)
    finally:
        await first.stop()
    record.write_text("not json")
    assert measured_first_start(record) is None  # a damaged record is no estimate, not an error
