"""The vector index re-trains its lists on a worker thread when it doubles: the call that starts
it returns at once, the index answers from its old lists meanwhile, and what was added, changed
or removed meanwhile is carried over when the new lists are swapped in."""

from __future__ import annotations

import logging
import threading

import numpy as np
import pytest

from policies.semantic_cache import index as index_module
from policies.semantic_cache.index import VectorIndex
from tests.policies.test_semantic_cache import _clustered

DIM = 32


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """k-means that waits until the test lets it finish (a synchronous training would wait
    inside `add` for an event only the test, after `add` returns, can set)."""
    release = threading.Event()
    kmeans = index_module.kmeans

    def gated(vectors: np.ndarray, k: int, *args: object, **kwargs: object) -> np.ndarray:
        if not release.wait(timeout=30):
            raise TimeoutError("the training ran in the call that started it")
        return kmeans(vectors, k)

    monkeypatch.setattr(index_module, "kmeans", gated)
    return release


def test_the_index_keeps_answering_while_it_trains_and_keeps_what_changed_meanwhile(gate: threading.Event) -> None:
    vectors = _clustered(700, DIM, seed=3)
    index = VectorIndex(DIM, ivf_min=256)
    for i in range(256):
        index.add(str(i), vectors[i])  # the 256th starts the training, and returns
    assert index.lists == 1
    for i in range(256, 600):  # meanwhile: added ...
        index.add(str(i), vectors[i])
    removed = [str(i) for i in range(0, 600, 7)]  # ... removed (old and new keys) ...
    for key in removed:
        assert index.remove(key)
    changed = {str(i): vectors[600 + n] for n, i in enumerate(range(1, 600, 61))}  # ... and moved
    for key, vector in changed.items():
        index.add(key, vector)
    assert index.search(vectors[2], 1)[0][0] == "2"  # the old (exhaustive) list answers

    gate.set()
    index.settle()
    assert index.lists > 1  # the trained lists are in
    expected = {str(i): vectors[i] for i in range(600) if str(i) not in removed} | changed  # 245: removed, re-added
    assert len(index) == len(expected) and {k for k, _ in index.items()} == set(expected)
    for key, vector in index.items():
        np.testing.assert_array_equal(vector, expected[key])
    for key in list(expected)[::5]:
        assert index.search(expected[key], 1)[0][0] == key
    for key in set(removed) - set(changed):
        assert key not in index and all(found != key for found, _ in index.search(vectors[int(key)], 5))


def test_a_training_that_fails_leaves_the_old_lists_and_is_tried_again(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    vectors = _clustered(1100, DIM, seed=4)
    kmeans, calls = index_module.kmeans, []

    def failing_once(vectors: np.ndarray, k: int, *args: object, **kwargs: object) -> np.ndarray:
        calls.append(len(vectors))
        if len(calls) == 1:
            raise MemoryError("no room for the centroids")
        return kmeans(vectors, k)

    monkeypatch.setattr(index_module, "kmeans", failing_once)
    index = VectorIndex(DIM, ivf_min=256)
    with caplog.at_level(logging.ERROR, "costgate.cache"):
        for i in range(300):
            index.add(str(i), vectors[i])
        index.settle()
    assert "could not re-train" in caplog.text and index.lists == 1  # the old list still answers
    assert index.search(vectors[5], 1)[0][0] == "5"
    for i in range(300, 1100):  # the next doubling (512) trains again
        index.add(str(i), vectors[i])
    index.settle()
    assert len(calls) >= 2 and index.lists > 1
    assert all(index.search(vectors[i], 1)[0][0] == str(i) for i in range(0, 1100, 37))
