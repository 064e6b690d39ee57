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

Given a `Judge` (the verifier for the team), MiniLM runs only where it can change the answer.
The verifier serves a pair only at or above a MiniLM cosine it can name before any MiniLM pass
(`Verifier.cosine_needed`: the default bound needs at least ~0.95, more for a pair with a
qualifier or a question word of its own), and never a pair with another number, another name,
a negation on one side... So the search takes only the candidates over the static gate for the
least cosine the team's verifier could need (`StaticEmbedder.gate_for`), and embeds, with the
question, only the *possible* ones: those the verifier does not refuse outright, each over the
static gate for the cosine it needs (`StaticEmbedder.clears`: the gate line on the static
cosine, and a second line on the static cosine plus the share of words the two have in
common). When none is possible, or when the nearest possible one is refused, the lookup is a
miss; only when that one would be served are the rest embedded too, to check that none of them
is nearer (then the verifier judges that one, as without a judge). What this can miss that
embedding every candidate would serve: a pair under either line while its MiniLM cosine is over
what the verifier needs, which `bench/semantic_cache_speed.py --recall-only` counts on held-out
pairs.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from policies.semantic_cache.differences import Parsed, word_overlap
from policies.semantic_cache.static_embedder import StaticEmbedder
from policies.semantic_cache.store import CacheStore, Candidate, Entry, QuestionVectors
from policies.semantic_cache.verifier import Verifier

EmbedMany = Callable[[list[str]], Awaitable[np.ndarray]]
SAME_WORDS = 1.0  # the MiniLM cosine of the same words up to case and punctuation, about


@dataclass(frozen=True)
class Nearest:
    entry: Entry
    cosine: float  # MiniLM cosine: what the verifier was calibrated on


class Judge(Protocol):
    """The verifier as the search needs it, for one query and one team's bound."""

    def least_needed(self) -> float | None:
        """The least MiniLM cosine at which any stored question that is not the same words
        could be served; None: only the same words can be."""
        ...

    def needed(self, entry: Entry) -> float | None:
        """The MiniLM cosine `accepts` needs for this stored question; None: refused at any."""
        ...

    def accepts(self, entry: Entry, cosine: float) -> bool: ...

    def overlap(self, entry: Entry) -> float:
        """The share of words the query and the stored question have in common (0 to 1)."""
        ...


class VerifierJudge:
    """A `Judge` that is the verifier at one bound, for one query: the query parsed only when a
    candidate comes near enough to be judged (most misses have none), stored questions through
    `parse` (the gateway's is a memo)."""

    def __init__(
        self, verifier: Verifier, question: str, max_false_hit_rate: float, parse: Callable[[str], Parsed]
    ) -> None:
        self.verifier, self.question, self.max_false_hit_rate, self.parse = (
            verifier,
            question,
            max_false_hit_rate,
            parse,
        )

    @functools.cached_property
    def query(self) -> Parsed:
        return Parsed.of(self.question)

    def least_needed(self) -> float | None:
        return self.verifier.least_cosine_needed(self.max_false_hit_rate)

    def needed(self, entry: Entry) -> float | None:
        return self.verifier.cosine_needed(self.query, self.parse(entry.question), self.max_false_hit_rate)

    def accepts(self, entry: Entry, cosine: float) -> bool:
        return self.verifier.accepts(self.query, self.parse(entry.question), cosine, self.max_false_hit_rate)

    def overlap(self, entry: Entry) -> float:
        return word_overlap(self.query, self.parse(entry.question))


@dataclass(frozen=True)
class TwoStageSearch:
    static: StaticEmbedder
    embed_full: EmbedMany  # MiniLM, off the event loop (`EmbedWorker.embed_many`)

    def vectors(self, question: str) -> QuestionVectors:
        return QuestionVectors(self.static.embed(question))

    async def nearest(
        self,
        store: CacheStore,
        namespace: str,
        question: str,
        vectors: QuestionVectors,
        now: float,
        judge: Judge | None = None,
    ) -> Nearest | None:
        """The stored question nearest by MiniLM cosine among the static candidates — with a
        `judge`, only when the judge accepts it (else None: a miss). Fills `vectors.full` when
        MiniLM ran (so storing this question later needs no pass)."""
        k = self.static.candidates
        if judge is None:
            found = await store.candidates(namespace, vectors.static, now, k, self.static.gate)
            full = {c.entry.key: c.full for c in found if c.full is not None}
            return await self._nearest_of(found, full, store, question, vectors) if found else None
        least = judge.least_needed()
        found = await store.candidates(
            namespace, vectors.static, now, k, self.static.gate_for(SAME_WORDS if least is None else least)
        )
        full = {c.entry.key: c.full for c in found if c.full is not None}
        possible = [c for c in found if self._possible(judge, c, least)]
        if not possible:
            return None
        best = await self._nearest_of(possible, full, store, question, vectors)
        if not judge.accepts(best.entry, best.cosine):
            return None
        if len(possible) < len(found):  # would be served: unless a refused candidate is nearer
            nearest = await self._nearest_of(found, full, store, question, vectors)
            if nearest.entry is not best.entry and not judge.accepts(nearest.entry, nearest.cosine):
                return None
            best = nearest
        return best

    def _possible(self, judge: Judge, candidate: Candidate, least: float | None) -> bool:
        overlap = functools.cache(lambda: judge.overlap(candidate.entry))
        if least is not None and overlap() < 1.0 and not self.static.clears(least, candidate.static_cosine, overlap):
            return False  # under the lines even at the least cosine any pair could need: no verifier checks
        needed = judge.needed(candidate.entry)
        return needed is not None and self.static.clears(needed, candidate.static_cosine, overlap)

    async def _nearest_of(
        self,
        found: list[Candidate],
        full: dict[str, np.ndarray],
        store: CacheStore,
        question: str,
        vectors: QuestionVectors,
    ) -> Nearest:
        """The nearest of `found` by MiniLM cosine, embedding the question and those of them
        not in `full` (kept there and with their entries) in one pass."""
        missing = [c for c in found if c.entry.key not in full]
        texts = ([question] if vectors.full is None else []) + [c.entry.question for c in missing]
        made = await self.embed_full(texts) if texts else np.zeros((0, 0), np.float32)
        if vectors.full is None:
            vectors.full, made = made[0], made[1:]
        for candidate, vector in zip(missing, made):
            full[candidate.entry.key] = vector
            await store.remember_full(candidate.entry, vector)
        return _best(found, full, vectors.full)


def _best(found: list[Candidate], full: dict[str, np.ndarray], query: np.ndarray) -> Nearest:
    cosines = [float(full[c.entry.key] @ query) for c in found]
    best = int(np.argmax(cosines))
    return Nearest(found[best].entry, cosines[best])
