"""The semantic cache's static stage, counted in process (no timing, so the machine's load does
not move the figures): the question stream and fillers the speed benchmark shares, the static
stage's recall against a full MiniLM search, the hits it loses with the verifier judging, and
MiniLM texts per question. `bench/semantic_cache_speed.py --recall-only | --texts-only` runs
them (and a full speed run ends with them).

Recall: the QQP protocol (store the `a`s, ask the `b`s) with the static stage and index as the
gateway runs them: of the queries whose nearest stored question by MiniLM cosine is at least
0.85, the share for which that question is among the static candidates over the gate (so the
verifier sees the same candidate as a full MiniLM search would show it).
"""

from __future__ import annotations

import functools
import json
import random
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cache_fill import met_vectors  # noqa: E402
from bench.harness import MODEL  # noqa: E402
from policies.exact_cache import CachedAnswer  # noqa: E402
from policies.semantic_cache.differences import Parsed  # noqa: E402
from policies.semantic_cache.distill_static import Pair  # noqa: E402
from policies.semantic_cache.embedder import Embedder  # noqa: E402
from policies.semantic_cache.index import NPROBE, VectorIndex  # noqa: E402
from policies.semantic_cache.search import VerifierJudge  # noqa: E402
from policies.semantic_cache.static_embedder import StaticEmbedder  # noqa: E402
from policies.semantic_cache.store import EmbeddedStore, Entry, QuestionVectors  # noqa: E402
from policies.semantic_cache.verifier import Verifier  # noqa: E402


def questions(qqp: Path) -> list[str]:
    rows = [json.loads(line) for line in qqp.read_text().splitlines()]
    texts = {q for r in rows for q in (r["a"], r["b"])}
    gsm8k = qqp.with_name("gsm8k_dev.jsonl")
    if gsm8k.exists():
        texts |= {json.loads(line)["prompt"] for line in gsm8k.read_text().splitlines()}
    ordered = sorted(texts)
    random.Random(0).shuffle(ordered)
    return ordered


def fillers(texts: list[str], n: int, seed: int) -> list[str]:
    """n distinct splices. (No serial number to make them distinct: a number on every stored
    question made the verifier refuse every one of them outright, and moved their static
    vectors away from any question asked.)"""
    rng = random.Random(seed)
    out: dict[str, None] = {}
    while len(out) < n:
        head, tail = rng.choice(texts).split(), rng.choice(texts).split()
        out[" ".join(head[: max(1, len(head) // 2)] + tail[len(tail) // 2 :])] = None
    return list(out)


def recall(qqp: Path, fill: int) -> None:
    """The static stage against a full MiniLM search, on the held-out pairs and on all of them."""
    rows = [json.loads(line) for line in qqp.read_text().splitlines()]
    pairs = [Pair(r["a"], r["b"]) for r in rows]
    static, full = StaticEmbedder.load(), Embedder()
    heldout = [p for p in pairs if p.held_out]
    extra = fillers(questions(qqp), fill, seed=99)
    extra_static, extra_full = static.embed_many(extra), full.embed_many(extra)
    print(
        f"\nRecall of the static stage (gate {static.gate:.3f}, {static.candidates} candidates), "
        "on the held-out pairs (the table's rows were fitted on the others; the gate was chosen here):\n\n"
        "| stored | queries | nearest >= 0.85 | "
        f"found | queries that ran MiniLM | MiniLM texts per query |\n|---|---|---|---|---|---|"
    )
    for label, stored, asked, with_fill in (
        ("their a", heldout, heldout, False),
        ("every a", pairs, heldout, False),
        (f"every a + {fill:,} fillers", pairs, heldout, True),
    ):
        a_static, a_full = static.embed_many([p.a for p in stored]), full.embed_many([p.a for p in stored])
        if with_fill:
            a_static, a_full = np.vstack([a_static, extra_static]), np.vstack([a_full, extra_full])
        b_static, b_full = static.embed_many([p.b for p in asked]), full.embed_many([p.b for p in asked])
        index = VectorIndex(static.dim)
        index.add_many([str(i) for i in range(len(a_static))], a_static)
        cosine = b_full @ a_full.T
        nearest, close = cosine.argmax(axis=1), cosine.max(axis=1) >= 0.85
        found = ran = texts = 0
        for q in range(len(asked)):
            kept = [int(k) for k, c in index.search(b_static[q], static.candidates) if c >= static.gate]
            ran += bool(kept)
            texts += (1 + len(kept)) if kept else 0
            found += close[q] and int(nearest[q]) in kept
        print(
            f"| {label} ({len(a_static):,}) | {label_of(asked)} | {close.sum()} | {found / close.sum():.2%} | "
            f"{ran / len(asked):.1%} | {texts / len(asked):.2f} |"
        )


def served_recall(qqp: Path, rates: list[float]) -> None:
    """The hits the gate and overlap lines can lose: every `a` stored, each held-out `b` asked,
    the verifier at each bound judging (1) the nearest stored question by MiniLM over the whole
    store, and (2) what the gateway's two-stage search with the verifier as judge finds. Hits of
    (1) that (2) misses are what the static stage costs. The shipped lines were fitted on these
    same pairs, so the count is repeated with lines they never saw: the held-out pairs in two
    halves, each half's queries searched with the lines `fit_gate_lines` draws from the other
    half; and once more with the shipped gate line alone (no overlap line), to show what that
    one adds."""
    import asyncio
    import dataclasses

    from policies.semantic_cache.distill_static import GATE_SLOPE, OVERLAP_WEIGHT, fit_gate_lines
    from policies.semantic_cache.search import TwoStageSearch

    rows = [json.loads(line) for line in qqp.read_text().splitlines()]
    pairs = [Pair(r["a"], r["b"]) for r in rows]
    heldout = [p for p in pairs if p.held_out]
    stored = list(dict.fromkeys(p.a for p in pairs))
    static, verifier, embedder = StaticEmbedder.load(), Verifier.load(), Embedder()
    asked = [p.b for p in heldout]
    vectors = dict(zip(stored + asked, embedder.embed_many(stored + asked)))
    a_full = np.stack([vectors[q] for q in stored])
    answer = CachedAnswer("a", "stop", MODEL, MODEL, 10, 10)
    parsed = {q: Parsed.of(q) for q in stored + asked}

    class Known:  # MiniLM vectors already made, for `fit_gate_lines`
        def embed_many(self, texts: list[str]) -> np.ndarray:
            return np.stack([vectors[q] for q in texts])

    async def count(rate: float, runs: list[tuple[StaticEmbedder, list[str]]]) -> tuple[int, int, int, int]:
        """Hits (whole store, two-stage), those lost, MiniLM texts: each run's questions searched
        with its line, in one store (so a stored question's MiniLM vector is made once)."""
        passes = [0]

        async def full(batch: list[str]) -> np.ndarray:
            passes[0] += len(batch)
            return np.stack([vectors[q] for q in batch])

        store = EmbeddedStore(10**7)
        for k, text in enumerate(stored):
            await store.put(Entry(str(k), "bench", "ns", text, answer, 0, 1e12), QuestionVectors(static.embed(text)))
        whole = staged = lost = 0
        for line, questions in runs:
            search = TwoStageSearch(line, full)
            for question in questions:
                cosines = a_full @ vectors[question]
                best = int(np.argmax(cosines))
                judge = VerifierJudge(verifier, question, rate, parsed.__getitem__)
                stored_best = Entry(str(best), "bench", "ns", stored[best], answer, 0, 1e12)
                hit = judge.accepts(stored_best, float(cosines[best]))
                found = await search.nearest(store, "ns", question, search.vectors(question), 1.0, judge)
                whole, staged, lost = whole + hit, staged + (found is not None), lost + (hit and found is None)
        return whole, staged, lost, passes[0]

    halves = [heldout[0::2], heldout[1::2]]
    crossed = []  # each half's queries, with the lines fitted on the other half
    for half, other in zip(halves, halves[::-1]):
        base, overlap_base = fit_gate_lines(static, Known(), pairs, other)
        line = dataclasses.replace(static, gate_line=(base, GATE_SLOPE), overlap_line=(OVERLAP_WEIGHT, overlap_base))
        crossed.append((line, [p.b for p in half]))
    alone = dataclasses.replace(static, overlap_line=None)

    def bases(line: StaticEmbedder) -> str:
        return f"{line.gate_line and line.gate_line[0]} and {line.overlap_line and line.overlap_line[1]}"

    print(
        f"\nHits lost to the static stage ({len(stored):,} stored a, {len(asked):,} held-out b asked, in process;"
        f" the shipped lines' bases {bases(static)}, the halves' {', '.join(bases(line) for line, _ in crossed)}):"
        "\n\n| max_false_hit_rate | line | hits, MiniLM over the whole store | hits, two-stage search | of those lost "
        "| MiniLM texts per question |\n|---|---|---|---|---|---|"
    )
    for rate in rates:
        for label, runs in (
            ("shipped (fitted on these pairs)", [(static, asked)]),
            ("the other half's", crossed),
            ("shipped gate line alone", [(alone, asked)]),
        ):
            whole, staged, lost, texts = asyncio.run(count(rate, runs))
            print(
                f"| {rate} | {label} | {whole} | {staged} | {lost} ({lost / max(whole, 1):.1%}) "
                f"| {texts / len(asked):.2f} |",
                flush=True,
            )


def minilm_texts(qqp: Path, fill: list[int], n: int, rates: list[float]) -> None:
    """MiniLM texts per question, counted in process (no timing, so the load does not move it):
    the speed runs' first `n` questions against their fillers, through the gateway's two-stage
    search, with the verifier judging the candidates first (as the gateway runs it), the same
    with the gate line alone (no overlap line), and without a judge (every candidate over the
    gate embedded, then the nearest judged). The hits must agree."""
    import asyncio
    import dataclasses

    from policies.semantic_cache.search import TwoStageSearch

    texts = questions(qqp)
    asked, sources = texts[0::2][:n], texts[1::2]
    shipped, verifier, embedder = StaticEmbedder.load(), Verifier.load(), Embedder()
    alone = dataclasses.replace(shipped, overlap_line=None)
    answer = CachedAnswer("filler", "stop", MODEL, MODEL, 10, 10)

    async def count(size: int, rate: float, judged: bool, static: StaticEmbedder) -> tuple[float, float, int]:
        made = [0]

        async def full(batch: list[str]) -> np.ndarray:
            made[0] += len(batch)
            return embedder.embed_many(batch)

        search, store = TwoStageSearch(static, full), EmbeddedStore(10**7)
        filler = fillers(sources, size, seed=0)
        for k, (text, vector) in enumerate(zip(filler, static.embed_many(filler))):
            await store.put(Entry(str(k), "bench", "ns", text, answer, 0, 1e12), QuestionVectors(vector))
        hits = ran = 0
        for question in asked:
            before, judge = made[0], VerifierJudge(verifier, question, rate, Parsed.of)
            found = await search.nearest(
                store, "ns", question, search.vectors(question), 1.0, judge if judged else None
            )
            if found is not None and not judged and not judge.accepts(found.entry, found.cosine):
                found = None
            hits, ran = hits + (found is not None), ran + (made[0] > before)
        return ran / len(asked), made[0] / len(asked), hits

    print(
        f"\nMiniLM texts per question ({len(asked):,} new questions, in process; stored fillers without MiniLM "
        "vectors: each candidate's is made once, then kept). Three searches: every candidate over the gate "
        "embedded / verify first, gate line alone / verify first with the overlap line (the gateway's):"
        "\n\n| stored | max_false_hit_rate | questions that ran MiniLM | texts per question | hits |"
        "\n|---|---|---|---|---|"
    )
    for size in fill:
        for rate in rates:
            runs = [
                asyncio.run(count(size, rate, judged, static))
                for judged, static in ((False, shipped), (True, alone), (True, shipped))
            ]
            hits = [r[2] for r in runs]
            same = "same" if len(set(hits)) == 1 else f"{hits[2] - hits[0]:+d} by the lines"
            print(
                f"| {size:,} | {rate} | {' / '.join(f'{r[0]:.1%}' for r in runs)} "
                f"| {' / '.join(f'{r[1]:.2f}' for r in runs)} | {' / '.join(map(str, hits))} ({same}) |",
                flush=True,
            )


def minilm_pass_cost(embedder: Embedder, runs: int = 100) -> None:
    """What batching MiniLM could save: one pass's CPU by length in tokens, and four questions of
    16 tokens in one padded pass against four passes (what the gateway runs, so that a vector
    never depends on its batch: `Embedder.embed_many`)."""
    import time

    def cpu_ms(ids: np.ndarray) -> float:
        feed = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
        embedder.session.run(None, feed)
        started = time.process_time()
        for _ in range(runs):
            embedder.session.run(None, feed)
        return (time.process_time() - started) * 1000 / runs

    def question(n: int, rows: int = 1) -> np.ndarray:  # [CLS] n - 2 word pieces [SEP]
        return np.array([[101] + [2054] * (n - 2) + [102]] * rows, dtype=np.int64)

    by_length = {n: cpu_ms(question(n)) for n in (4, 16, 32, 64)}
    per_token = (by_length[64] - by_length[4]) / 60
    print(
        "  MiniLM, one pass by length: "
        + ", ".join(f"{n} tokens {ms:.2f} ms" for n, ms in by_length.items())
        + f" ({per_token * 1000:.0f} us a token, ~{by_length[4] - 4 * per_token:.2f} ms a pass besides);"
        f" 4 questions of 16 tokens: one batch {cpu_ms(question(16, 4)):.2f} ms, four passes "
        f"{4 * by_length[16]:.2f} ms"
    )


def label_of(asked: list[Pair]) -> str:
    return f"held-out b ({len(asked):,})"


def miss_cpu(qqp: Path, size: int, n: int, rate: float, nprobes: tuple[int, ...] = (NPROBE, NPROBE // 2)) -> None:
    """Where a miss's CPU goes, in process on this one thread: `n` new questions against `size`
    fillers in the steady state (the fillers they meet over the flat gate have their MiniLM
    vectors), each looked up through the gateway's two-stage search with the verifier judging
    at `rate` (MiniLM called in line, its CPU counted apart) and stored when it misses; then the
    static index search alone, with and without the team's floor, at each `nprobe`."""
    import asyncio
    import time

    from policies.semantic_cache.search import TwoStageSearch

    texts = questions(qqp)
    asked, filler = texts[0::2][:n], fillers(texts[1::2], size, seed=0)
    static, verifier, embedder = StaticEmbedder.load(), Verifier.load(), Embedder()
    vectors = static.embed_many(filler)
    index = VectorIndex(static.dim)
    index.add_many([str(k) for k in range(size)], vectors)
    made = met_vectors(static, index, filler, static.embed_many(asked), embedder)
    answer = CachedAnswer("filler", "stop", MODEL, MODEL, 10, 10)
    parse = functools.lru_cache(maxsize=50_000)(Parsed.of)  # stored questions' parses, memoised as in the gateway

    minilm = [0.0, 0]

    async def full(batch: list[str]) -> np.ndarray:
        started = time.process_time()
        out = embedder.embed_many(batch)
        minilm[0] += time.process_time() - started
        minilm[1] += len(batch)
        return out

    async def run() -> tuple[float, int]:
        store, search = EmbeddedStore(10**7), TwoStageSearch(static, full)
        for k, text in enumerate(filler):
            await store.put(
                Entry(str(k), "bench", "ns", text, answer, 0, 1e12), QuestionVectors(vectors[k], made.get(k))
            )
        started, hits = time.process_time(), 0
        for i, question in enumerate(asked):
            found = await search.nearest(
                store,
                "ns",
                question,
                (v := search.vectors(question)),
                1.0,
                VerifierJudge(verifier, question, rate, parse),
            )
            hits += found is not None
            if found is None:
                await store.put(Entry(f"q{i}", "bench", "ns", question, answer, 0, 1e12), v)
        return time.process_time() - started, hits

    total, hits = asyncio.run(run())
    ms = 1000 / n
    print(
        f"\nCPU of a semantic lookup and store, in process, one thread ({n:,} new questions, {size:,} fillers, "
        f"steady state, max_false_hit_rate {rate}): {total * ms:.2f} ms a question, of which MiniLM "
        f"{minilm[0] * ms:.2f} ms ({minilm[1]} texts, {1000 * minilm[0] / max(minilm[1], 1):.2f} ms a text) and "
        f"the rest {(total - minilm[0]) * ms:.2f} ms; {hits} hits"
    )
    minilm_pass_cost(embedder)
    floor = static.gate_for(verifier.least_cosine_needed(rate) or 1.0)
    queries = static.embed_many(asked)
    for nprobe in nprobes:
        index.nprobe = nprobe
        for label, at in (("no floor", -1.0), (f"the team's floor {floor:.2f}", floor)):
            started = time.process_time()
            for q in queries:
                index.search(q, static.candidates, at)
            print(f"  static index search, nprobe {nprobe}, {label}: {(time.process_time() - started) * ms:.3f} ms")
