"""The semantic cache's two-stage lookup (policies/semantic_cache/search.py): static vectors
that do not depend on their company, MiniLM only near a stored question, the verifier as judge
(what it refuses at any cosine, or under the static gate for the cosine it needs, costs no
MiniLM pass and never changes the answer), and concurrent lookups through the worker."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import numpy as np
import pytest

from policies.semantic_cache.store import EmbeddedStore, Entry
from tests.policies.cache_support import entry

if TYPE_CHECKING:
    from policies.semantic_cache.embedder import Embedder
    from policies.semantic_cache.search import TwoStageSearch, VerifierJudge
    from policies.semantic_cache.static_embedder import StaticEmbedder


def counted_search(embedder: Embedder, static: StaticEmbedder | None = None) -> tuple[TwoStageSearch, list[list[str]]]:
    """A two-stage search (the shipped static table unless `static`) whose MiniLM is `embedder`,
    and the passes it asks for, each a list of texts."""
    from policies.semantic_cache.search import TwoStageSearch
    from policies.semantic_cache.static_embedder import StaticEmbedder

    passes: list[list[str]] = []

    async def full(batch: list[str]) -> np.ndarray:
        passes.append(batch)
        return embedder.embed_many(batch)

    return TwoStageSearch(static or StaticEmbedder.load(), full), passes


def test_static_vectors_do_not_depend_on_their_company() -> None:
    from policies.semantic_cache.static_embedder import StaticEmbedder

    static = StaticEmbedder.load()
    texts = ["short", "a somewhat longer question about the weather in Paris in spring", ""]
    many = static.embed_many(texts)
    for text, vector in zip(texts, many):
        assert np.array_equal(vector, static.embed(text))
    assert np.linalg.norm(many[0]) == pytest.approx(1, abs=1e-5) and not many[2].any()
    assert static.embed("How do I learn Python?") @ static.embed("How can I learn python") > static.embed(
        "How do I learn Python?"
    ) @ static.embed("What is the capital of Peru?")


async def test_two_stage_search_runs_minilm_only_near_a_stored_question(embedder) -> None:
    search, passes = counted_search(embedder)
    store = EmbeddedStore(max_entries=100)
    stored = ["How do I learn Python quickly?", "What is the best way to cook rice?", "Why is the sky blue?"]
    for i, question in enumerate(stored):
        await store.put(entry(str(i), question=question), search.vectors(question))
    far = search.vectors("Which telescope should an amateur astronomer buy first?")
    assert await search.nearest(store, "ns", "Which telescope ...", far, now=0) is None
    assert passes == [] and far.full is None  # a new question: no MiniLM pass at all

    asked = "How can I learn Python fast?"
    vectors = search.vectors(asked)
    nearest = await search.nearest(store, "ns", asked, vectors, now=0)
    assert nearest is not None and nearest.entry.question == stored[0]
    assert nearest.cosine == pytest.approx(float(embedder.embed(asked) @ embedder.embed(stored[0])), abs=1e-6)
    assert passes[0][0] == asked and stored[0] in passes[0]  # the query and its candidates, in one pass
    assert np.array_equal(vectors.full, embedder.embed(asked))  # kept for storing this question
    passes.clear()
    again = search.vectors(asked)
    await search.nearest(store, "ns", asked, again, now=0)
    assert passes == [[asked]]  # the stored question's MiniLM vector was kept from the first time


STORED = [
    "How do I lose 5 kg in a month?",
    "How do I lose weight in a month?",
    "What is the best pizza in Boston?",
    "What is the best pizza place in Austin?",
    "How can I learn Python quickly?",
    "How can I learn Java quickly?",
    "Is it safe to eat raw eggs?",
    "Why is the sky blue?",
]
ASKED = [
    "How do I lose 50 kg in a month?",
    "How can I lose weight in a month?",
    "what is the best pizza in boston",
    "What's the best pizza in Chicago?",
    "How do I learn Python fast?",
    "How can I learn Ruby quickly?",
    "Is it not safe to eat raw eggs?",
    "Is it safe to eat raw eggs?",
    "Why is the sky blue during the day?",
    "Which telescope should an amateur astronomer buy first?",
]


def _verifier_judge(question: str, rate: float) -> VerifierJudge:
    from policies.semantic_cache.differences import Parsed
    from policies.semantic_cache.search import VerifierJudge
    from policies.semantic_cache.verifier import Verifier

    return VerifierJudge(Verifier.load(), question, rate, Parsed.of)


@pytest.mark.parametrize("rate", [0.05, 0.25])
async def test_a_judge_skips_minilm_passes_but_never_changes_the_answer(embedder, rate: float) -> None:
    """With the verifier as judge, the search serves exactly what it serves without one (the
    nearest candidate, judged by the verifier), from fewer MiniLM texts."""
    search, passes = counted_search(embedder)
    plain, judged = EmbeddedStore(max_entries=100), EmbeddedStore(max_entries=100)
    for i, question in enumerate(STORED):
        await plain.put(entry(str(i), question=question), search.vectors(question))
        await judged.put(entry(str(i), question=question), search.vectors(question))
    hits = 0
    plain_texts = judged_texts = 0
    for asked in ASKED:
        judge = _verifier_judge(asked, rate)
        passes.clear()
        nearest = await search.nearest(plain, "ns", asked, search.vectors(asked), now=0)
        plain_texts += sum(map(len, passes))
        expected = nearest.entry.key if nearest is not None and judge.accepts(nearest.entry, nearest.cosine) else None
        passes.clear()
        found = await search.nearest(judged, "ns", asked, search.vectors(asked), now=0, judge=judge)
        judged_texts += sum(map(len, passes))
        assert (found.entry.key if found else None) == expected, asked
        if found is not None:
            assert found.cosine == pytest.approx(float(embedder.embed(asked) @ embedder.embed(found.entry.question)))
        hits += found is not None
    assert hits >= 2  # the same words, and a paraphrase: both served either way
    assert judged_texts < plain_texts


async def test_a_candidate_the_verifier_refuses_at_any_cosine_costs_no_minilm_pass(embedder) -> None:
    search, passes = counted_search(embedder)
    store = EmbeddedStore(max_entries=100)
    for key, question in (("5", "How do I lose 5 kg in a month?"), ("10", "How do I lose 10 kg in a month?")):
        await store.put(entry(key, question=question), search.vectors(question))
    asked = "How do I lose 50 kg in a month?"
    vectors = search.vectors(asked)
    assert await search.nearest(store, "ns", asked, vectors, now=0, judge=_verifier_judge(asked, 0.25)) is None
    assert passes == [] and vectors.full is None  # another number: refused without MiniLM
    assert await search.nearest(store, "ns", asked, vectors, now=0) is not None
    assert len(passes[0]) == 3  # without a judge: the question and both candidates


def test_cosine_needed_is_where_accepts_begins() -> None:
    """`cosine_needed` is None only where `accepts` refuses at every cosine, and otherwise the
    least cosine it serves at: the search relies on both to skip MiniLM."""
    from policies.semantic_cache.differences import Parsed
    from policies.semantic_cache.verifier import Verifier

    verifier = Verifier.load()
    cosines = np.linspace(-1, 1, 81)
    for rate in (0.0, 0.05, 0.25):
        for stored in STORED:
            for asked in ASKED:
                query, candidate = Parsed.of(asked), Parsed.of(stored)
                needed = verifier.cosine_needed(query, candidate, rate)
                served = [bool(verifier.accepts(query, candidate, c, rate)) for c in cosines]
                assert served == [needed is not None and c >= needed for c in cosines], (asked, stored, rate)
    refused = Parsed.of("How do I lose 50 kg in a month?"), Parsed.of("How do I lose 5 kg in a month?")
    assert verifier.cosine_needed(*refused, 0.25) is None
    unlikely = Parsed.of("Is it safe to eat raw eggs?"), Parsed.of("Why is it safe to eat raw eggs and how much?")
    assert verifier.cosine_needed(*unlikely, 0.05) is None  # no veto, but under the default's threshold at cosine 1
    assert verifier.cosine_needed(*unlikely, 0.25) is not None
    same = Parsed.of("why is the sky blue"), Parsed.of("Why is the sky blue?")
    assert verifier.cosine_needed(*same, 0.0) == -1.0  # the same words are served even with no calibrated bound


async def test_concurrent_lookups_through_the_worker_answer_as_one_at_a_time(embedder) -> None:
    """Misses that arrive together share MiniLM passes on the worker (and may make the same
    stored question's vector at once): each still gets the answer it gets alone."""

    from policies.semantic_cache.embedder import EmbedWorker
    from policies.semantic_cache.search import TwoStageSearch
    from policies.semantic_cache.static_embedder import StaticEmbedder

    async def stored(search: TwoStageSearch) -> EmbeddedStore:
        store = EmbeddedStore(max_entries=100)
        for i, question in enumerate(STORED):
            await store.put(entry(str(i), question=question), search.vectors(question))
        return store

    async def alone(batch: list[str]) -> np.ndarray:
        return embedder.embed_many(batch)

    def key(found: object) -> str | None:
        return None if found is None else found.entry.key  # type: ignore[attr-defined]

    one_by_one = TwoStageSearch(StaticEmbedder.load(), alone)
    store = await stored(one_by_one)
    asked = ASKED * 2
    expected = [
        key(await one_by_one.nearest(store, "ns", q, one_by_one.vectors(q), 0, _verifier_judge(q, 0.25))) for q in asked
    ]
    worker = EmbedWorker(embedder)
    together = TwoStageSearch(StaticEmbedder.load(), worker.embed_many)
    store = await stored(together)
    found = await asyncio.gather(
        *(together.nearest(store, "ns", q, together.vectors(q), 0, _verifier_judge(q, 0.25)) for q in asked)
    )
    worker.close()
    assert [key(f) for f in found] == expected and any(expected)
    for question, hit in zip(asked, found):
        if hit is not None:
            assert hit.cosine == pytest.approx(float(embedder.embed(question) @ embedder.embed(hit.entry.question)))


def test_cosine_needed_is_where_accepts_starts() -> None:
    """`accepts` is `cosine >= cosine_needed`, so the search can know before any MiniLM pass
    what a stored question would need; the least of it bounds every pair's."""
    from policies.semantic_cache.differences import Parsed
    from policies.semantic_cache.verifier import Verifier

    verifier = Verifier.load()
    grid = np.linspace(0.0, 1.0, 201)
    for rate in (0.0, 0.05, 0.25):
        least = verifier.least_cosine_needed(rate)
        for stored in STORED:
            for asked in ASKED:
                query, candidate = Parsed.of(asked), Parsed.of(stored)
                needed = verifier.cosine_needed(query, candidate, rate)
                accepted = [verifier.accepts(query, candidate, float(c), rate) for c in grid]
                if needed is None:
                    assert not any(accepted)
                    continue
                if needed > -1.0:  # not the same words
                    assert least is not None and least <= needed + 1e-12
                    assert all(a == (c >= needed) for a, c in zip(accepted, grid) if abs(c - needed) > 1e-6)
    assert verifier.least_cosine_needed(0.0) is None  # no bound that strict: only the same words
    paraphrase = Parsed.of("How can I lose weight in a month?"), Parsed.of("How do I lose weight in a month?")
    assert verifier.cosine_needed(*paraphrase, 0.05) == pytest.approx(verifier.least_cosine_needed(0.05))
    qualified = Parsed.of("Is it safe to eat raw eggs?"), Parsed.of("Is it safe to eat raw eggs every day?")
    assert verifier.cosine_needed(*qualified, 0.05) > verifier.cosine_needed(*paraphrase, 0.05)


def test_the_shipped_gate_line_rises_with_the_cosine_needed() -> None:
    from policies.semantic_cache.static_embedder import GATE_AT, StaticEmbedder

    static = StaticEmbedder.load()
    assert static.gate_line is not None
    base, slope = static.gate_line
    assert slope > 0 and static.gate_for(GATE_AT) == max(static.gate, base)  # the flat gate at the loose end
    assert static.gate_for(0.95) > static.gate_for(0.92) > static.gate
    assert static.gate_for(0.95) == pytest.approx(base + slope * (0.95 - GATE_AT))
    flat = StaticEmbedder.of(static.table, 0.55, 8)  # a file without the line: the flat gate
    assert flat.gate_for(0.99) == flat.gate_for(0.86) == 0.55


class _FixedJudge:
    """Needs the given MiniLM cosine for each stored question; counts what it was asked. Word
    overlaps are 1 (every word shared: the overlap line never binds) unless given."""

    def __init__(self, least: float | None, needed: dict[str, float], overlaps: dict[str, float] | None = None) -> None:
        self.least, self.need, self.overlaps, self.asked = least, needed, overlaps or {}, []

    def least_needed(self) -> float | None:
        return self.least

    def needed(self, entry: Entry) -> float | None:
        self.asked.append(entry.question)
        return self.need.get(entry.question)

    def accepts(self, entry: Entry, cosine: float) -> bool:
        return cosine >= self.need[entry.question]

    def overlap(self, entry: Entry) -> float:
        return self.overlaps.get(entry.question, 1.0)


async def test_a_candidate_under_the_gate_for_the_cosine_it_needs_costs_no_minilm_pass(embedder) -> None:
    from policies.semantic_cache.static_embedder import GATE_AT, StaticEmbedder

    static = StaticEmbedder.load()
    base, slope = static.gate_line or (0.0, 0.0)
    search, passes = counted_search(embedder, static)
    store = EmbeddedStore(max_entries=100)
    asked = "How can I lose weight in a month?"
    near, far = "How do I lose weight in a month?", "What should I eat to lose weight?"
    for key, question in (("near", near), ("far", far)):
        await store.put(entry(key, question=question), search.vectors(question))
    s = {q: float(search.vectors(asked).static @ search.vectors(q).static) for q in (near, far)}
    assert s[near] > s[far] > static.gate_for(GATE_AT)

    def needing(gate: float) -> float:  # the MiniLM cosine whose static gate is `gate` (over the flat one)
        assert gate > static.gate
        return GATE_AT + (gate - base) / slope

    # `far` needs a MiniLM cosine whose gate is over its static cosine: never embedded.
    judge = _FixedJudge(GATE_AT, {near: needing(s[near] - 0.01), far: needing(s[far] + 0.01)})
    found = await search.nearest(store, "ns", asked, search.vectors(asked), now=0, judge=judge)
    cosine = float(embedder.embed(asked) @ embedder.embed(near))
    assert passes == [[asked, near]]
    assert (found is not None) is (cosine >= judge.need[near]) and sorted(judge.asked) == sorted([near, far])

    # A team whose verifier needs more than either could reach: neither is even read.
    passes.clear()
    strict = _FixedJudge(needing(s[near] + 0.01), {})
    assert await search.nearest(store, "ns", asked, search.vectors(asked), now=0, judge=strict) is None
    assert passes == [] and strict.asked == []


def test_word_overlap_is_the_share_of_words_in_common() -> None:
    from policies.semantic_cache.differences import Parsed, word_overlap

    a, b = Parsed.of("How do I learn Python?"), Parsed.of("How can I learn Python fast?")
    assert word_overlap(a, b) == word_overlap(b, a) == pytest.approx(4 / 7)  # how, i, learn, python of 7 words
    assert word_overlap(a, Parsed.of("how do i LEARN python")) == 1.0  # case and punctuation aside
    assert word_overlap(a, Parsed.of("What is the capital of France?")) == 0.0


def test_the_shipped_overlap_line_asks_for_more_static_cosine_from_fewer_shared_words() -> None:
    from policies.semantic_cache.static_embedder import StaticEmbedder

    static = StaticEmbedder.load()
    assert static.overlap_line is not None and static.gate_line is not None
    weight, base = static.overlap_line
    assert 0 < weight < 1
    needed = 0.95
    first = static.gate_for(needed)  # the gate line alone: what the overlap line adds to
    line = base + static.gate_line[1] * (needed - 0.85)
    assert first < line < first + weight  # it binds for some overlaps, and for none when every word is shared
    at = first + 0.02  # over the gate line: clears the overlap line from this share of words up
    share = (line - at) / weight
    assert 0 < share < 1
    assert static.clears(needed, at, lambda: share + 0.01) and static.clears(needed, at, lambda: 1.0)
    assert not static.clears(needed, at, lambda: share - 0.01)
    assert not static.clears(needed, first - 0.01, lambda: pytest.fail("asked past a failed gate line"))
    assert static.clears(-1.0, static.gate, lambda: 0.0)  # the same words up to case and punctuation: any
    bare = StaticEmbedder.of(static.table, static.gate, 8, static.gate_line)  # a file without the overlap line
    assert bare.clears(needed, first, lambda: 0.0)


async def test_a_candidate_sharing_too_few_words_for_its_static_cosine_costs_no_minilm_pass(embedder) -> None:
    from policies.semantic_cache.static_embedder import GATE_AT, StaticEmbedder

    static = StaticEmbedder.load()
    search, passes = counted_search(embedder, static)
    store = EmbeddedStore(max_entries=100)
    asked, near = "How can I lose weight in a month?", "How do I lose weight in a month?"
    await store.put(entry("near", question=near), search.vectors(near))
    s = float(search.vectors(asked).static @ search.vectors(near).static)
    assert static.overlap_line is not None and static.gate_line is not None
    (weight, overlap_base), (base, slope) = static.overlap_line, static.gate_line
    needed = GATE_AT + (s - 0.1 - base) / slope  # its gate line 0.1 under the pair's static cosine
    assert static.gate_for(needed) == pytest.approx(s - 0.1)
    assert s < overlap_base + slope * (needed - GATE_AT) <= s + weight  # the overlap line binds
    judge = _FixedJudge(GATE_AT, {near: needed}, overlaps={near: 0.0})  # no word shared
    assert await search.nearest(store, "ns", asked, search.vectors(asked), now=0, judge=judge) is None
    assert passes == []
    assert judge.asked == [near]  # the verifier named what it needs; the lines refused it
    # When even the least cosine any pair could need puts it under the overlap line, the
    # verifier is not asked at all.
    early = _FixedJudge(needed, {near: needed}, overlaps={near: 0.0})
    assert await search.nearest(store, "ns", asked, search.vectors(asked), now=0, judge=early) is None
    assert passes == [] and early.asked == []
    judge.overlaps[near] = 1.0  # every word shared: embedded and judged
    found = await search.nearest(store, "ns", asked, search.vectors(asked), now=0, judge=judge)
    cosine = float(embedder.embed(asked) @ embedder.embed(near))
    assert passes == [[asked, near]] and (found is not None) is (cosine >= needed)
