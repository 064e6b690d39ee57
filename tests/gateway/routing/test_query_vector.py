"""A cascade's query vector (gateway/routing/confidence.py QueryVector): one MiniLM pass a
request, started before the first tier answers; a failed pass leaves the topic at the mean and
the answer still scored; a pass not needed is cancelled."""

from __future__ import annotations

import asyncio
import logging

import numpy as np
import pytest

from gateway.routing.confidence import QueryVector
from policies.scorers import Scored


async def test_one_pass_a_request_whatever_the_tiers() -> None:
    calls: list[list[str]] = []

    async def embed(texts: list[str]) -> np.ndarray:
        calls.append(texts)
        return np.full((len(texts), 4), 0.5, dtype=np.float32)

    vector = QueryVector.start(embed, "How far is the moon?")
    first = await vector.on(Scored("How far is the moon?", "far"))
    second = await vector.on(Scored("How far is the moon?", "very far"))
    assert calls == [["How far is the moon?"]]
    assert first.query_vector is second.query_vector and first.query_vector.tolist() == [0.5] * 4
    assert first.answer == "far" and second.answer == "very far"


async def test_a_failed_pass_leaves_the_item_without_a_vector(caplog: pytest.LogCaptureFixture) -> None:
    async def broken(texts: list[str]) -> np.ndarray:
        raise RuntimeError("onnxruntime exploded")

    with caplog.at_level(logging.WARNING, "costgate.cascade"):
        item = await QueryVector.start(broken, "q").on(Scored("q", "a"))
    assert item == Scored("q", "a") and item.query_vector is None
    assert "onnxruntime exploded" in caplog.text


async def test_no_model_and_a_known_vector() -> None:
    assert (await QueryVector.start(None, "q").on(Scored("q", "a"))).query_vector is None
    known = np.ones(3, dtype=np.float32)
    assert (await QueryVector.known(known).on(Scored("q", "a"))).query_vector is known


async def test_a_pass_no_tier_needs_is_cancelled() -> None:
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def slow(texts: list[str]) -> np.ndarray:
        started.set()
        try:
            await asyncio.Event().wait()  # a pass that would never end
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return np.zeros((1, 4), dtype=np.float32)

    vector = QueryVector.start(slow, "q")
    await started.wait()
    vector.cancel()
    await asyncio.wait_for(cancelled.wait(), timeout=5)
