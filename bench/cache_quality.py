"""The semantic cache's hit quality at the product's defaults, by the adjudicated protocol
(issue 12). `bench/semantic_cache.py` runs it; it needs a running gateway.

Through the gateway, configured with nothing but `cache: {semantic: {enabled: true}}`, with
requests that set no temperature (as most applications send them): one team stores the `a` of
the first 2,000 dev pairs (each stored even when a near question is already there:
`x-costgate-cache: no-cache`), then asks every `b` (kept out of the cache, `no-store`, so a
query only ever meets the stored `a`s). The fake upstream echoes each question, so an answer
says which stored question it came from. A hit is right when the adjudicated verdict for
(query, that stored question) is `same`, or the two have the same text up to case and
punctuation; hits the labels do not cover are counted apart and listed, to be judged by the
rule. Served: right hits over the queries that have an adjudicated same question stored. A
second team then asks every `b` with nothing stored: every hit there would cross teams.

In process, on the adjudicated labels: the verifier's cross-validated figures (each fifth of the
queries served by a verifier fitted and thresholded on the rest) and plain cosine's on the same
folds: fixed thresholds, and the cosine threshold chosen the verifier's way for each bound.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import openai

from policies.semantic_cache import verifier_calibration as cal
from policies.semantic_cache.crossval import FoldResult, Summary, cross_validate, fold_result, summarise
from policies.semantic_cache.pair_features import normalise
from policies.semantic_cache.verifier import Verifier
from policies.semantic_cache.verifier_calibration import Examples, Labelled

CONCURRENCY = 8
STORE_ONLY = {"x-costgate-cache": "no-cache"}  # store every `a`, even next to a near one
ASK_ONLY = {"x-costgate-cache": "no-store"}  # a query meets the stored `a`s only
PLAIN_COSINES = (0.97, 0.95, 0.93)


async def ask_all(client: openai.AsyncOpenAI, texts: Sequence[str], headers: dict[str, str]) -> list[tuple[str, str]]:
    """(x-costgate-cache, answer) per text, CONCURRENCY at a time, with no temperature set."""
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(text: str) -> tuple[str, str]:
        async with gate:
            raw = await client.chat.completions.with_raw_response.create(
                model="small", messages=[{"role": "user", "content": text}], extra_headers=headers
            )
            return raw.headers["x-costgate-cache"], raw.parse().choices[0].message.content or ""

    return await asyncio.gather(*(one(t) for t in texts))


@dataclass
class Count:
    """Hits of one team's queries, counted by the adjudicated verdicts."""

    queries: int = 0
    queries_with_same: int = 0
    hits: int = 0
    right: int = 0
    not_covered: list[tuple[str, str]] = field(default_factory=list)  # (query, stored) no verdict covers

    @property
    def covered_hits(self) -> int:
        return self.hits - len(self.not_covered)

    def line(self) -> str:
        covered = self.covered_hits
        return (
            f"{self.queries} queries ({self.queries_with_same} with an adjudicated same question stored): "
            f"{self.hits} hits, {self.right} right = {self.right / max(covered, 1):.1%} of the {covered} "
            f"the labels cover; served {self.right / max(self.queries_with_same, 1):.1%}; "
            f"{len(self.not_covered)} hits not covered"
        )


def count(
    stored: Sequence[str],
    queries: Sequence[str],
    answers: Sequence[tuple[str, str]],
    verdicts: dict[tuple[str, str], bool],
) -> Count:
    by_answer: dict[str, list[str]] = {}
    for a in stored:
        by_answer.setdefault("echo: " + a, []).append(a)
    same_stored = {q for (q, s), same in verdicts.items() if same and s in set(stored)}
    result = Count(queries=len(queries), queries_with_same=sum(q in same_stored for q in queries))
    for query, (status, answer) in zip(queries, answers):
        if status == "miss":
            continue
        result.hits += 1
        sources = by_answer.get(answer, [])
        judged = [verdicts[(query, s)] for s in sources if (query, s) in verdicts]
        if any(normalise(s) == normalise(query) for s in sources) or (judged and all(judged)):
            result.right += 1
        elif not judged:
            result.not_covered.append((query, sources[0] if sources else answer))
    return result


def print_cross_validated(
    labelled: Sequence[Labelled], embed: cal.Embed, rates: Sequence[float], default_rate: float
) -> None:
    ex = cal.examples(labelled, embed)
    at = cal.lookups(ex)
    print(
        f"\nCross-validated on {len(labelled)} adjudicated candidates ({len(at)} queries, "
        f"{len({int(g) for g, s in zip(ex.group, ex.same) if s})} with a same question stored), five folds "
        "by query; each fold served by a verifier fitted and thresholded on the other four:\n"
    )
    print("| method | hits right, pooled (lowest-highest fold) | served, pooled (lowest-highest fold) |\n|---|---|---|")
    results = cross_validate(ex, rates)
    for rate in rates:
        label = f"verifier, max_false_hit_rate {rate}" + (" (the default)" if rate == default_rate else "")
        print(row(label, summarise(results, rate)))
    fold = ex.folds()
    for rate in (default_rate,):
        chosen = [plain_cosine_result(ex, fold, k, rate) for k in np.unique(fold)]
        print(row(f"plain cosine, threshold chosen for {rate} (baseline)", summarise(chosen, rate)))
    for threshold in PLAIN_COSINES:
        baseline = Verifier.plain_cosine(threshold)
        fixed = [
            fold_result(ex.subset(fold == k), fixed_cosine(ex.subset(fold == k), baseline), int(k), threshold)
            for k in np.unique(fold)
        ]
        print(row(f"plain cosine >= {threshold} (baseline)", summarise(fixed, threshold)))


def fixed_cosine(ex: Examples, baseline: Verifier) -> np.ndarray:
    return ex.identical | (ex.cosine >= baseline.min_cosine)


def plain_cosine_result(ex: Examples, fold: np.ndarray, k: int, rate: float) -> FoldResult:
    """Plain cosine with its threshold chosen as the verifier's are (the Clopper-Pearson bound
    on the other folds' lookups), serving fold k."""
    train, test = ex.subset(fold != k), ex.subset(fold == k)
    at = cal.lookups(train)
    threshold = cal.choose_threshold(np.where(train.identical, 2.0, train.cosine)[at], ~train.same[at], rate)
    accepted = test.identical if threshold is None else test.identical | (test.cosine >= threshold)
    return fold_result(test, accepted, int(k), rate)


def row(label: str, s: Summary) -> str:
    return (
        f"| {label} | {s.right}/{s.hits} = {s.precision:.1%} ({s.precision_range[0]:.1%}-"
        f"{s.precision_range[1]:.1%}) | {s.served:.1%} ({s.served_range[0]:.1%}-{s.served_range[1]:.1%}) |"
    )
