"""Fill a gateway's semantic cache offline, before it starts: entries written straight into
the store it will read (an embedded snapshot in its data directory, or Redis), each with its
static vector and, for the steady state, the MiniLM vectors earlier lookups would have made.
bench/semantic_cache_speed.py fills 10k and 100k namespaces this way in about a minute, where
asking the gateway to store them would take as long as the measurement itself;
bench/semantic_cache_stage.py's in-process count uses the same steady state (`met_vectors`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from bench.harness import MODEL
from policies.exact_cache import CachedAnswer
from policies.semantic_cache.embedder import Embedder
from policies.semantic_cache.index import VectorIndex
from policies.semantic_cache.static_embedder import StaticEmbedder
from policies.semantic_cache.store import CacheStore, EmbeddedStore, Entry, QuestionVectors


def met_vectors(
    static: StaticEmbedder, index: VectorIndex, texts: list[str], asked: np.ndarray, full: Embedder
) -> dict[int, np.ndarray]:
    """The steady state: MiniLM vectors of the stored `texts` (rows of `index`, keyed by their
    position) that the `asked` questions' static vectors meet over the flat gate, as a
    namespace's entries have them once earlier lookups have met them."""
    met = sorted({int(k) for q in asked for k, _ in index.search(q, static.candidates, static.gate)})
    return dict(zip(met, full.embed_many([texts[k] for k in met]))) if met else {}


def fill_namespaces(
    plan: list[tuple[str, list[str]]],
    asked: list[str],
    with_vectors: int,
    data_dir: Path,
    redis_at: tuple[str, str] | None = None,  # (url, key prefix): fill Redis instead of a snapshot
) -> None:
    """Store the fillers (namespace, texts) where the gateway will find them after a restart;
    with `with_vectors`, those that the first `with_vectors` questions asked meet over the
    static gate come with their MiniLM vectors (the steady state, where the lazy vectors are
    made)."""
    static = StaticEmbedder.load()
    full = Embedder() if with_vectors else None
    asked_static = static.embed_many(asked[:with_vectors])
    now = time.time()
    answer = CachedAnswer("filler", "stop", MODEL, MODEL, 10, 10)

    def entries(namespace: str, texts: list[str]) -> Iterator[tuple[Entry, QuestionVectors]]:
        vectors = static.embed_many(texts)
        made: dict[int, np.ndarray] = {}
        if full is not None:
            index = VectorIndex(static.dim)
            index.add_many([str(k) for k in range(len(texts))], vectors)
            made = met_vectors(static, index, texts, asked_static, full)
            print(
                f"  {len(made):,} fillers met by the first {with_vectors:,} questions: MiniLM vectors made", flush=True
            )
        for k, text in enumerate(texts):
            key = f"fill-{namespace[:8]}-{k}"
            yield (
                Entry(key, "bench", namespace, text, answer, now, now + 86400, last_used=now),
                QuestionVectors(vectors[k], made.get(k)),
            )

    async def fill() -> None:
        store: CacheStore
        if redis_at is not None:
            from policies.semantic_cache.redis_store import RedisStore

            store = RedisStore(*redis_at, 10**7)
        else:
            store = EmbeddedStore(10**7)
        for namespace, texts in plan:
            for entry, vectors in entries(namespace, texts):
                await store.put(entry, vectors)
        if isinstance(store, EmbeddedStore):
            store.save(data_dir / "cache")
        else:
            await store.stop()

    asyncio.run(fill())
