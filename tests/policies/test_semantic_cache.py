"""The semantic cache's parts: verifier, calibration arithmetic, vector index, embedded store."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from policies.exact_cache import CachedAnswer
from policies.semantic_cache.calibration import choose_threshold, fit_logistic, upper_bound
from policies.semantic_cache.embedder import DIM, Embedder
from policies.semantic_cache.features import Parsed, vetoed
from policies.semantic_cache.index import VectorIndex
from policies.semantic_cache.store import EmbeddedStore, Entry, keep_score
from policies.semantic_cache.verifier import Verifier

LOOSEST = 0.25  # the loosest bound the shipped verifier is calibrated for


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder()


@pytest.fixture(scope="module")
def verifier() -> Verifier:
    return Verifier.load()


def accepts(embedder: Embedder, verifier: Verifier, stored: str, asked: str, rate: float = LOOSEST) -> bool:
    cosine = float(embedder.embed(stored) @ embedder.embed(asked))
    return verifier.accepts(Parsed.of(asked), Parsed.of(stored), cosine, rate)


@pytest.mark.parametrize("stored, asked", [
    ("How do I lose 5 kg?", "How do I lose 50 kg?"),
    ("How do I lose five kg?", "How do I lose 50 kg?"),
    ("Is it safe to drink coffee while pregnant?", "Is it not safe to drink coffee while pregnant?"),
    ("Why can't I sleep at night?", "Why can I sleep at night?"),
    ("What is the capital of France?", "What is the capital of Germany?"),
    ("Which is a good rehab center near San Juan County CO?", "Which is a good rehab center near San Miguel County CO?"),
    ("How do you convert voltage source to current source?", "How do you convert current source to voltage source?"),
    ("What are some ideas for a 6th grade science project?", "What are some ideas for a 10th grade science project?"),
])
def test_near_misses_are_refused_even_at_the_loosest_bound(embedder, verifier, stored: str, asked: str) -> None:
    assert not accepts(embedder, verifier, stored, asked)


@pytest.mark.parametrize("stored, asked", [
    ("How do I learn Python quickly?", "How can I learn Python quickly?"),
    ("What are the benefits of drinking green tea?", "What are the benefits of green tea?"),
])
def test_paraphrases_are_served_at_a_loose_bound(embedder, verifier, stored: str, asked: str) -> None:
    assert accepts(embedder, verifier, stored, asked)


def test_a_strict_bound_serves_only_the_same_question(embedder, verifier) -> None:
    assert verifier.threshold_for(0.01) is None  # no threshold is that safe on the dev data
    assert accepts(embedder, verifier, "How can I lose weight fast?", "how can i lose weight FAST", 0.01)
    assert not accepts(embedder, verifier, "How do I learn Python quickly?", "How can I learn Python quickly?", 0.01)


@pytest.mark.parametrize("a, b, veto", [
    ("lose 5 kg", "lose 50 kg", True),
    ("lose 5 kg", "lose five kg", False),
    ("is it safe", "is it not safe", True),
    ("Trip to Paris", "Trip to Rome", True),
    ("trip to paris", "Trip to Paris", False),
    ("How do I cook rice?", "How can I cook rice?", False),
])
def test_vetoes(a: str, b: str, veto: bool) -> None:
    assert vetoed(Parsed.of(a), Parsed.of(b)) is veto


def test_embeddings_are_unit_and_batch_consistent(embedder) -> None:
    texts = ["short", "a somewhat longer question about the weather in Paris in spring"]
    batch = embedder.embed_many(texts)
    assert batch.shape == (2, DIM)
    assert np.allclose(np.linalg.norm(batch, axis=1), 1, atol=1e-3)
    assert np.allclose(batch[0], embedder.embed("short"), atol=1e-3)  # padding does not leak in


@pytest.mark.parametrize("wrong, n, expected", [
    (0, 100, 1 - 0.05 ** (1 / 100)),  # the "rule of three" case, exactly
    (0, 0, 1.0),
    (10, 10, 1.0),
    (0, 1, 0.95),
])
def test_upper_bound_known_values(wrong: int, n: int, expected: float) -> None:
    assert upper_bound(wrong, n) == pytest.approx(expected, abs=1e-6)


def test_upper_bound_is_above_the_observed_rate_and_shrinks_with_n() -> None:
    assert upper_bound(5, 100) > 0.05
    assert upper_bound(50, 1000) < upper_bound(5, 100)


@pytest.mark.parametrize("scores, wrong, rate, expected", [
    ([0.9] * 300 + [0.5] * 300, [False] * 300 + [True] * 300, 0.02, 0.9),  # stop before the bad block
    ([0.9] * 10, [False] * 10, 0.02, None),  # too few hits to be sure of anything
    ([0.9] * 300 + [0.5] * 300, [False] * 600, 0.02, 0.5),
    ([0.9] * 300 + [0.8] * 300, [True] * 300 + [False] * 300, 0.1, None),  # the best-scored are wrong
])
def test_choose_threshold(scores, wrong, rate: float, expected: float | None) -> None:
    assert choose_threshold(np.array(scores), np.array(wrong), rate) == expected


def test_fit_logistic_separates_a_simple_problem() -> None:
    x = np.column_stack([np.ones(200), np.linspace(-1, 1, 200)])
    y = (x[:, 1] > 0).astype(float)
    w = fit_logistic(x, y, l2=0.1)
    assert w[1] > 0 and abs(w[0]) < 1


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
        assert (len(index.blocks) > 1) is (ivf_min == 512)
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


def _entry(key: str, team: str = "t", ns: str = "ns", expires: float = 1e12, hits: int = 0,
           last_used: float = 0.0) -> Entry:
    answer = CachedAnswer("answer " + key, "stop", "m", "small", 3, 4)
    return Entry(key, team, ns, "question " + key, answer, 0.0, expires, hits, last_used)


@pytest.mark.parametrize("a, b, a_outlives_b", [
    ((100.0, 0), (50.0, 0), True),  # more recent
    ((100.0, 0), (100.0 + 3600, 0), False),
    ((100.0, 1023), (100.0 + 5 * 3600, 0), True),  # a thousand hits outlive five hours
    ((100.0, 1), (100.0, 0), True),
])
def test_keep_score(a, b, a_outlives_b: bool) -> None:
    assert (keep_score(*a) > keep_score(*b)) is a_outlives_b


async def test_store_ttl_eviction_purge_and_snapshot(tmp_path: Path) -> None:
    store = EmbeddedStore(max_entries=10, path=tmp_path)
    vectors = _clustered(12)
    await store.put(_entry("old", expires=50.0), vectors[0])
    assert await store.get("old", now=10.0) is not None
    assert await store.get("old", now=60.0) is None  # expired: gone, from the index too
    assert await store.nearest("ns", vectors[0], now=60.0) == []
    for i in range(10):
        await store.put(_entry(f"e{i}", last_used=1000.0 + i, hits=50 if i == 0 else 0), vectors[i + 1])
    await store.put(_entry("new", last_used=2000.0), vectors[11])
    assert await store.count() == 10
    assert await store.get("e1", now=0) is None  # least recent, rarely hit: evicted first
    assert await store.get("e0", now=0) is not None  # oldest, but hit often: kept
    await store.put(_entry("other", team="u", ns="ns2", last_used=3000.0), vectors[1])
    await store.stop()  # writes the snapshot
    again = EmbeddedStore(max_entries=10, path=tmp_path)
    await again.start()
    assert await again.count() == 10
    (entry, score), = await again.nearest("ns", vectors[11], now=0)
    assert entry.key == "new" and score == pytest.approx(1.0, abs=1e-5)
    assert await again.purge("u") == 1
    assert await again.nearest("ns2", vectors[1], now=0) == []
    assert math.isclose((await again.get("e0", now=0)).answer.completion_tokens, 4)


def test_bulk_load_matches_one_by_one() -> None:
    vectors = _clustered(1200)
    bulk, single = VectorIndex(DIM, ivf_min=512), VectorIndex(DIM, ivf_min=512)
    bulk.add_many([str(i) for i in range(1200)], vectors)
    for i, v in enumerate(vectors):
        single.add(str(i), v)
    assert len(bulk) == len(single) == 1200 and len(bulk.blocks) > 1
    for i in range(0, 1200, 97):
        assert bulk.search(vectors[i], 1)[0][0] == single.search(vectors[i], 1)[0][0] == str(i)


async def test_micro_batcher_coalesces_concurrent_queries(embedder) -> None:
    import asyncio

    from policies.semantic_cache.embedder import MicroBatcher

    calls: list[int] = []

    class Counting:
        def embed_many(self, texts: list[str]) -> np.ndarray:
            calls.append(len(texts))
            return embedder.embed_many(texts)

    batcher = MicroBatcher(Counting(), window_s=0.01)  # type: ignore[arg-type]
    texts = [f"question number {i} about tea" for i in range(12)]
    vectors = await asyncio.gather(*(batcher.embed(t) for t in texts))
    assert sum(calls) == 12 and len(calls) < 12
    for text, vector in zip(texts, vectors):
        assert np.allclose(vector, embedder.embed(text), atol=1e-6)  # the same as asked alone
