"""The semantic cache's parts: embedder, vector index, embedded store (the two-stage lookup's
tests are in test_semantic_search.py, the verifier's in test_cache_verifier.py and
test_cache_differences.py)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from policies.semantic_cache.embedder import DIM
from policies.semantic_cache.index import VectorIndex
from policies.semantic_cache.store import EmbeddedStore, QuestionVectors, fair_eviction, keep_score
from tests.policies.cache_support import entry


def test_embeddings_are_unit_and_batch_consistent(embedder) -> None:
    texts = ["short", "a somewhat longer question about the weather in Paris in spring"]
    batch = embedder.embed_many(texts)
    assert batch.shape == (2, DIM)
    assert np.allclose(np.linalg.norm(batch, axis=1), 1, atol=1e-3)
    assert np.allclose(batch[0], embedder.embed("short"), atol=1e-3)  # padding does not leak in


def _clustered(n: int, dim: int = DIM, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(64, dim))
    v = centres[rng.integers(0, 64, n)] + 0.6 * rng.normal(size=(n, dim))
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def test_index_finds_near_duplicates_exhaustively_and_as_ivf() -> None:
    vectors = _clustered(3000)
    rng = np.random.default_rng(1)
    for ivf_min in (10**9, 512):  # exhaustive; inverted file (re-trained as it grows)
        index = VectorIndex(DIM, ivf_min=ivf_min)
        for i, v in enumerate(vectors):
            index.add(str(i), v)
        index.settle()  # the last doubling's training, on its thread
        assert (index.lists > 1) is (ivf_min == 512)
        found = 0
        for i in rng.choice(len(vectors), 100, replace=False):
            query = vectors[i] + 0.01 * rng.normal(size=DIM).astype(np.float32)
            query /= np.linalg.norm(query)
            key, score = index.search(query, 1)[0]
            found += key == str(i)
            assert score > 0.9
        assert found >= 97


def test_index_remove_keeps_the_rest_findable() -> None:
    vectors = _clustered(700)
    index = VectorIndex(DIM, ivf_min=256)
    for i, v in enumerate(vectors):
        index.add(str(i), v)
    for i in range(0, 700, 2):
        assert index.remove(str(i))
    assert len(index) == 350 and not index.remove("0")
    for i in range(1, 700, 50):
        assert index.search(vectors[i], 1)[0][0] == str(i)
    assert all(index.search(vectors[i], 1)[0][0] != str(i) for i in range(0, 700, 50))


@pytest.mark.parametrize(
    "a, b, a_outlives_b",
    [
        ((100.0, 0), (50.0, 0), True),  # more recent
        ((100.0, 0), (100.0 + 3600, 0), False),
        ((100.0, 1023), (100.0 + 5 * 3600, 0), True),  # a thousand hits outlive five hours
        ((100.0, 1), (100.0, 0), True),
    ],
)
def test_keep_score(a, b, a_outlives_b: bool) -> None:
    assert (keep_score(*a) > keep_score(*b)) is a_outlives_b


async def test_store_ttl_eviction_purge_and_snapshot(tmp_path: Path) -> None:
    store = EmbeddedStore(max_entries=10, path=tmp_path)
    vectors = _clustered(12)
    await store.put(entry("old", expires=50.0), QuestionVectors(vectors[0]))
    assert await store.get("old", now=10.0) is not None
    assert await store.get("old", now=60.0) is None  # expired: gone, from the index too
    assert await store.candidates("ns", vectors[0], now=60.0, k=1) == []
    for i in range(10):
        await store.put(entry(f"e{i}", last_used=1000.0 + i, hits=50 if i == 0 else 0), QuestionVectors(vectors[i + 1]))
    await store.put(entry("new", last_used=2000.0), QuestionVectors(vectors[11]))
    assert await store.count() == 10
    assert await store.get("e1", now=0) is None  # least recent, rarely hit: evicted first
    assert await store.get("e0", now=0) is not None  # oldest, but hit often: kept
    await store.put(entry("other", team="u", ns="ns2", last_used=3000.0), QuestionVectors(vectors[1]))
    await store.remember_full(store.entries["new"], vectors[5])  # a lookup made its MiniLM vector
    await store.stop()  # writes the snapshot
    again = EmbeddedStore(max_entries=10, path=tmp_path)
    await again.start()
    assert await again.count() == 10
    (found,) = await again.candidates("ns", vectors[11], now=0, k=1)
    assert found.entry.key == "new" and found.static_cosine == pytest.approx(1.0, abs=1e-5)
    assert found.full is not None and np.array_equal(found.full, vectors[5])
    assert (await again.candidates("ns", vectors[2], now=0, k=1))[0].full is None  # none made yet
    assert await again.purge("u") == 1
    assert await again.candidates("ns2", vectors[1], now=0, k=1) == []
    assert math.isclose((await again.get("e0", now=0)).answer.completion_tokens, 4)


def test_bulk_load_matches_one_by_one() -> None:
    vectors = _clustered(1200)
    bulk, single = VectorIndex(DIM, ivf_min=512), VectorIndex(DIM, ivf_min=512)
    bulk.add_many([str(i) for i in range(1200)], vectors)
    for i, v in enumerate(vectors):
        single.add(str(i), v)
    assert len(bulk) == len(single) == 1200 and bulk.lists > 1
    for i in range(0, 1200, 97):
        assert bulk.search(vectors[i], 1)[0][0] == single.search(vectors[i], 1)[0][0] == str(i)


async def test_embed_worker_gathers_concurrent_texts_off_the_event_loop(embedder) -> None:
    import asyncio
    import threading

    from policies.semantic_cache.embedder import EmbedWorker

    calls: list[int] = []
    release = threading.Event()

    class Gated:
        def embed_many(self, texts: list[str]) -> np.ndarray:
            calls.append(len(texts))
            if not release.wait(timeout=30):  # the event loop sets it: it must stay free meanwhile
                raise TimeoutError("the event loop was blocked while MiniLM ran")
            return embedder.embed_many(texts)

    worker = EmbedWorker(Gated())  # type: ignore[arg-type]
    texts = [f"question number {i} about tea" for i in range(12)]
    first = asyncio.ensure_future(worker.embed_many(texts[:1]))
    rest = [asyncio.ensure_future(worker.embed_many([t])) for t in texts[1:]]
    await asyncio.sleep(0)
    release.set()  # runs only because the loop is not waiting on the pass
    vectors = [v[0] for v in await asyncio.gather(first, *rest)]
    worker.close()
    assert calls == [1, 11]  # the texts asked for during the first pass went in one second pass
    for text, vector in zip(texts, vectors):
        assert np.array_equal(vector, embedder.embed(text))  # the same as asked alone, bit for bit


def test_index_search_with_a_floor_is_the_search_filtered() -> None:
    vectors = _clustered(2000)
    rng = np.random.default_rng(2)
    for ivf_min in (10**9, 512):
        index = VectorIndex(DIM, ivf_min=ivf_min)
        index.add_many([str(i) for i in range(len(vectors))], vectors)
        for i in rng.choice(len(vectors), 30, replace=False):
            for floor in (-1.0, 0.3, 0.6, 0.95):
                expected = [(k, c) for k, c in index.search(vectors[i], 8) if c >= floor]
                assert index.search(vectors[i], 8, floor) == expected


@pytest.mark.parametrize("lists_per_root", [1, 2, 4])
def test_index_keeps_lists_per_root_sqrt_n_lists_and_finds_each_vector(lists_per_root: int) -> None:
    vectors = _clustered(2500)
    index = VectorIndex(DIM, ivf_min=512, lists_per_root=lists_per_root)
    index.add_many([str(i) for i in range(len(vectors))], vectors)
    assert index.lists == int(lists_per_root * np.sqrt(2500))
    assert all(index.search(vectors[i], 1)[0][0] == str(i) for i in range(0, 2500, 25))


@pytest.mark.parametrize(
    "sizes, n, taken",
    [
        ({"a": 90, "b": 10}, 5, {"a": 5}),  # the largest holding gives first
        ({"a": 50, "b": 50}, 11, {"a": 6, "b": 5}),  # ties share, in team order
        ({"a": 10, "b": 8, "c": 1}, 5, {"a": 4, "b": 1}),  # down to a common level
        ({"a": 10, "b": 10, "c": 10}, 4, {"a": 2, "b": 1, "c": 1}),
        ({"a": 3}, 10, {"a": 3}),  # never more than held
        ({}, 3, {}),
    ],
)
def test_fair_eviction_takes_from_the_largest_holdings(sizes: dict, n: int, taken: dict) -> None:
    assert fair_eviction(sizes, n) == taken


async def test_a_team_flooding_the_cache_evicts_its_own_entries_not_anothers() -> None:
    store = EmbeddedStore(max_entries=20)
    vectors = _clustered(60, seed=3)
    for i in range(5):  # old and never hit: the first to go under one shared recency order
        await store.put(entry(f"quiet{i}", team="quiet", last_used=float(i)), QuestionVectors(vectors[i]))
    for i in range(50):
        await store.put(entry(f"noisy{i}", team="noisy", last_used=1e6 + i), QuestionVectors(vectors[10 + i]))
    assert await store.count() <= 20
    assert None not in [await store.get(f"quiet{i}", now=0) for i in range(5)]
    assert await store.get("noisy49", now=0) is not None and await store.get("noisy0", now=0) is None
