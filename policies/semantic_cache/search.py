"""The semantic lookup in two stages, so that a miss rarely pays for MiniLM.

1. The question's static vector (~30 µs) finds the `candidates` stored questions of its
   namespace nearest by static cosine; those under the static `gate` are dropped. For most new
   questions none is left: a miss, with no transformer pass at all.
2. Otherwise MiniLM embeds the question, and every remaining candidate whose MiniLM vector no
   lookup has made yet (then kept with its entry), in one pass on the worker thread; the
   candidate with the highest MiniLM cosine is the one the verifier judges.

So the verifier sees what a MiniLM search of the whole namespace would show it — the nearest
stored question by MiniLM cosine — whenever the static stage keeps that question among its
candidates, which `bench/semantic_cache_speed.py --recall` measures on held-out question pairs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import numpy as np

from policies.semantic_cache.static_embedder import StaticEmbedder
from policies.semantic_cache.store import CacheStore, Candidate, Entry, QuestionVectors

EmbedMany = Callable[[list[str]], Awaitable[np.ndarray]]


@dataclass(frozen=True)
class Nearest:
    entry: Entry
    cosine: float  # MiniLM cosine: what the verifier was calibrated on


@dataclass(frozen=True)
class TwoStageSearch:
    static: StaticEmbedder
    embed_full: EmbedMany  # MiniLM, off the event loop (`EmbedWorker.embed_many`)

    def vectors(self, question: str) -> QuestionVectors:
        return QuestionVectors(self.static.embed(question))

    async def nearest(
        self, store: CacheStore, namespace: str, question: str, vectors: QuestionVectors, now: float
    ) -> Nearest | None:
        """The stored question nearest by MiniLM cosine among the static candidates; fills
        `vectors.full` when MiniLM ran (so storing this question later needs no pass)."""
        found = await store.candidates(namespace, vectors.static, now, self.static.candidates)
        found = [c for c in found if c.static_cosine >= self.static.gate]
        if not found:
            return None
        missing = [c for c in found if c.full is None]
        texts = ([question] if vectors.full is None else []) + [c.entry.question for c in missing]
        made = await self.embed_full(texts) if texts else np.zeros((0, 0), np.float32)
        if vectors.full is None:
            vectors.full, made = made[0], made[1:]
        full = {c.entry.key: c.full for c in found if c.full is not None}
        for candidate, vector in zip(missing, made):
            full[candidate.entry.key] = vector
            await store.remember_full(candidate.entry, vector)
        return _best(found, full, vectors.full)


def _best(found: list[Candidate], full: dict[str, np.ndarray], query: np.ndarray) -> Nearest:
    cosines = [float(full[c.entry.key] @ query) for c in found]
    best = int(np.argmax(cosines))
    return Nearest(found[best].entry, cosines[best])
