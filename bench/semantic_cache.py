"""Semantic cache on Quora question pairs, through a running gateway (fake upstream).

    python bench/semantic_cache.py [PATH_TO_qqp_dev.jsonl] [--limit N] [--fill 10000,100000]

Protocol (the data README's): for the held-out part of the pairs — the third that neither
the verifier's fit nor its thresholds saw (`calibration.split`) — store every `a` (one request
each), then ask every `b`. A hit is right when the pair is a duplicate and the served answer is
its own `a`'s, or when the stored question has the same text up to case and punctuation
(the fake upstream echoes the question, so the answer tells which question it belongs to).
Reported: share of hits right, share of duplicates served, for the verifier at several
false-hit bounds and for plain cosine thresholds (the baseline) in the same run, each as a
team of its own (so its own namespace). Then lookup latency (index search + entry fetch +
verifier; and embedding separately) with 10k and 100k entries in the asking namespace, read
from the gateway's own histograms, plus exact in-process timings on one core.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np
import openai

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from policies.exact_cache import CachedAnswer, request_keys  # noqa: E402
from policies.semantic_cache.calibration import Pair, split  # noqa: E402
from policies.semantic_cache.embedder import Embedder  # noqa: E402
from policies.semantic_cache.features import normalise, words  # noqa: E402
from policies.semantic_cache.index import VectorIndex  # noqa: E402
from policies.semantic_cache.store import EmbeddedStore, Entry  # noqa: E402
from policies.semantic_cache.verifier import Verifier  # noqa: E402
from tests.support import FakeUpstream, GatewayProcess, model, wait_http  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "qqp_dev.jsonl"
VERIFIER_RATES = (0.2, 0.25)
COSINE_THRESHOLDS = (0.95, 0.93)
OFFLINE_RATES = (0.15, 0.2, 0.25)
OFFLINE_COSINES = (0.95, 0.93, 0.9)
ONE_CORE = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
CONCURRENCY = 8


def teams(workdir: Path) -> dict[str, dict]:
    out = {f"verifier-{r}": {"semantic": True, "max_false_hit_rate": r} for r in VERIFIER_RATES}
    for t in COSINE_THRESHOLDS:
        path = workdir / f"cosine-{t}.npz"
        Verifier.plain_cosine(t).save(path)
        out[f"cosine-{t}"] = {"semantic": True, "max_false_hit_rate": 0.99, "verifier": str(path)}
    return out


async def ask_all(client: openai.AsyncOpenAI, texts: list[str]) -> list[tuple[str, str]]:
    """(x-costgate-cache, answer) per text, CONCURRENCY at a time."""
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(text: str) -> tuple[str, str]:
        async with gate:
            raw = await client.chat.completions.with_raw_response.create(
                model="small", temperature=0, messages=[{"role": "user", "content": text}])
            return raw.headers["x-costgate-cache"], raw.parse().choices[0].message.content or ""

    return await asyncio.gather(*(one(t) for t in texts))


def score(pairs: list[Pair], answers: list[tuple[str, str]]) -> dict[str, float]:
    owner = {}  # answer text -> the stored questions it answers (echo: the question)
    for p in pairs:
        owner.setdefault("echo: " + p.a, []).append(p.a)
    hits = right = served = 0
    for p, (status, answer) in zip(pairs, answers):
        if status != "semantic" and status != "exact":
            continue
        hits += 1
        ok = (p.duplicate and answer == "echo: " + p.a) or \
            any(normalise(q) == normalise(p.b) for q in owner.get(answer, ()))
        right += ok
        served += ok and p.duplicate
    duplicates = sum(p.duplicate for p in pairs)
    return {"hits": hits, "right": right / hits if hits else float("nan"), "served": served / duplicates}


def histogram(text: str, name: str) -> tuple[list[float], list[float]]:
    bounds, counts = [], []
    for line in text.splitlines():
        m = re.match(rf'^{name}_bucket{{le="([^"]+)"}} (\S+)$', line)
        if m:
            bounds.append(float("inf") if m.group(1) == "+Inf" else float(m.group(1)))
            counts.append(float(m.group(2)))
    return bounds, counts


def quantile(bounds: list[float], before: list[float], after: list[float], q: float) -> float:
    """The q-quantile of the observations between two scrapes, interpolated within a bucket."""
    counts = [a - b for a, b in zip(after, before)]
    total = counts[-1]
    target, lower, previous = q * total, 0.0, 0.0
    for bound, cumulative in zip(bounds, counts):
        if cumulative >= target:
            if bound == float("inf"):
                return lower
            share = (target - previous) / max(cumulative - previous, 1e-9)
            return lower + share * (bound - lower)
        lower, previous = bound, cumulative
    return lower


def fill_snapshot(data_dir: Path, namespaces: dict[str, tuple[str, int]], vectors: np.ndarray) -> None:
    """Filler entries in the asking namespaces: mixtures of two real questions' vectors (as
    clustered as real traffic, rarely a near-duplicate of anything)."""
    store = EmbeddedStore(max_entries=10**7)
    rng = np.random.default_rng(0)
    now = time.time()
    for name, (namespace, n) in namespaces.items():
        i, j = rng.integers(0, len(vectors), n), rng.integers(0, len(vectors), n)
        mixed = vectors[i] + vectors[j]
        mixed /= np.linalg.norm(mixed, axis=1, keepdims=True)
        answer = CachedAnswer("filler", "stop", "echo-small", "small", 10, 10)
        for k in range(n):
            key = f"fill-{name}-{k}"
            entry = Entry(key, "bench", namespace, f"filler question {k}", answer, now, now + 86400, last_used=now)
            store.entries[key] = entry
            store.indexes.setdefault(namespace, VectorIndex(vectors.shape[1])).add(key, mixed[k])
    store.save(data_dir / "cache")


def offline(pairs: list[Pair], embedder: Embedder) -> None:
    """The same protocol and verifier on every held-out pair, in process (no HTTP): a check
    on the gateway figures with ~2.4x the pairs."""
    from policies.semantic_cache.features import Parsed

    verifier = Verifier.load()
    stored, asked = embedder.embed_many([p.a for p in pairs]), embedder.embed_many([p.b for p in pairs])
    nearest = np.argmax(asked @ stored.T, axis=1)
    cosine = np.einsum("ij,ij->i", asked, stored[nearest])
    right = np.array([(j == i and pairs[i].duplicate) or normalise(pairs[j].a) == normalise(pairs[i].b)
                      for i, j in enumerate(nearest)])
    duplicate = np.array([p.duplicate for p in pairs])
    parsed_a, parsed_b = [Parsed.of(p.a) for p in pairs], [Parsed.of(p.b) for p in pairs]
    print(f"\nIn process, all {len(pairs)} held-out pairs:\n\n| method | hits | hits right | duplicates served |"
          "\n|---|---|---|---|")
    rows = [(f"verifier, max_false_hit_rate {r}",
             np.array([verifier.accepts(parsed_b[i], parsed_a[j], float(cosine[i]), r) for i, j in enumerate(nearest)]))
            for r in OFFLINE_RATES]
    rows += [(f"plain cosine >= {t} (baseline)", cosine >= t) for t in OFFLINE_COSINES]
    for label, hit in rows:
        print(f"| {label} | {hit.sum()} | {(hit & right).sum() / max(hit.sum(), 1):.1%} | "
              f"{(hit & right & duplicate).sum() / duplicate.sum():.1%} |")


FUNCTION_WORDS = {"a", "an", "the", "can", "could", "do", "does", "should", "would", "will", "in", "on", "is",
                  "are", "my", "your", "i", "you", "one"}


def label_ceiling(pairs: list[Pair], embedder: Embedder) -> None:
    """How right the counting rule lets *any* verifier be: the lookups whose nearest stored
    question differs from the query only in function words ("How can I improve my English
    pronunciation?" / "How could I ...") are as sure a paraphrase as a cache meets, yet the
    labels score a share of them wrong. No fitting is involved, so every pair is used."""
    def core(text: str) -> tuple[str, ...]:
        return tuple(w for w in words(text) if w not in FUNCTION_WORDS)

    stored, asked = embedder.embed_many([p.a for p in pairs]), embedder.embed_many([p.b for p in pairs])
    nearest = np.argmax(asked @ stored.T, axis=1)
    looked = right = own_wrong = 0
    for i, j in enumerate(nearest):
        if normalise(pairs[i].b) == normalise(pairs[j].a) or core(pairs[i].b) != core(pairs[j].a):
            continue
        looked += 1
        if j == i and pairs[i].duplicate:
            right += 1
        elif j == i:
            own_wrong += 1
    print(f"\nLabel ceiling, all {len(pairs)} pairs: {looked} lookups find a stored question that differs only "
          f"in function words; the counting rule scores {right / max(looked, 1):.1%} of them right "
          f"(wrong: {own_wrong} own pair labelled not duplicate, {looked - right - own_wrong} another pair's question)")


def in_process_timings(questions: list[str], fill: list[int]) -> dict[str, float]:
    """Exact timings on one core, for the figures the histograms can only bracket."""
    embedder = Embedder(threads=1)
    for q in questions[:20]:
        embedder.embed(q)
    t = []
    for q in questions[:300]:
        start = time.perf_counter()
        embedder.embed(q)
        t.append(time.perf_counter() - start)
    out = {"embed_p50_ms": 1000 * float(np.percentile(t, 50)), "embed_p99_ms": 1000 * float(np.percentile(t, 99))}
    vectors = embedder.embed_many(questions[:2000])
    rng = np.random.default_rng(0)
    for n in fill:
        index = VectorIndex(vectors.shape[1])
        i, j = rng.integers(0, len(vectors), n), rng.integers(0, len(vectors), n)
        mixed = vectors[i] + vectors[j]
        mixed /= np.linalg.norm(mixed, axis=1, keepdims=True)
        for k in range(n):
            index.add(str(k), mixed[k])
        t = []
        for q in vectors[:500]:
            start = time.perf_counter()
            index.search(q, 1)
            t.append(time.perf_counter() - start)
        brute = mixed @ vectors[0]  # warm
        tb = []
        for q in vectors[:100]:
            start = time.perf_counter()
            brute = mixed @ q
            int(np.argmax(brute))
            tb.append(time.perf_counter() - start)
        out[f"search_{n}_p50_ms"] = 1000 * float(np.percentile(t, 50))
        out[f"search_{n}_p99_ms"] = 1000 * float(np.percentile(t, 99))
        out[f"bruteforce_{n}_p50_ms"] = 1000 * float(np.percentile(tb, 50))
    return out


async def run(args: argparse.Namespace) -> None:
    os.environ.update(ONE_CORE)
    rows = [json.loads(line) for line in open(args.data)]
    heldout = split([Pair(r["a"], r["b"], r["duplicate"]) for r in rows])["heldout"]
    pairs = heldout[:args.limit]
    fill = [int(x) for x in args.fill.split(",") if x]
    work = Path(tempfile.mkdtemp(prefix="bench-cache-"))
    team_config = teams(work)
    fill_teams = {f"fill-{n}": {"semantic": True, "max_false_hit_rate": 0.25} for n in fill}
    fake = FakeUpstream(work)
    config = {"models": [model("small", "echo-small", fake.url, "0.15", "0.6")],
              "cache": {"max_entries": 10**6, "teams": {**team_config, **fill_teams}}}
    gw = GatewayProcess(config, work / "gw", env=ONE_CORE)
    keys = {t: gw.new_key(t) for t in [*team_config, *fill_teams]}
    team_ids = {t["name"]: t["id"] for t in gw.admin("GET", "/admin/teams").json()["data"]}
    load = os.getloadavg()[0]
    print(f"{len(pairs)} held-out pairs ({sum(p.duplicate for p in pairs)} duplicates); "
          f"machine load {load:.1f} on {os.cpu_count()} cores (shared)")
    try:
        print("\n| method | hits | hits right | duplicates served |\n|---|---|---|---|")
        for team in team_config:
            client = gw.async_client(keys[team], timeout=60)
            await ask_all(client, [p.a for p in pairs])
            answers = await ask_all(client, [p.b for p in pairs])
            s = score(pairs, answers)
            label = f"verifier, max_false_hit_rate {team.split('-')[1]}" if team.startswith("verifier") \
                else f"plain cosine >= {team.split('-')[1]} (baseline)"
            print(f"| {label} | {s['hits']} | {s['right']:.1%} | {s['served']:.1%} |")
        if fill:  # restart on a snapshot that puts the filler in the fill teams' namespaces
            gw.stop()
            vectors = Embedder().embed_many([p.a for p in pairs])
            body = {"model": "small", "temperature": 0, "messages": [{"role": "user", "content": "x"}]}
            namespaces = {f"fill-{n}": (request_keys(team_ids[f"fill-{n}"], "chat.completions", body).namespace, n)
                          for n in fill}
            fill_snapshot(Path(gw.config["data_dir"]), namespaces, vectors)
            try:
                gw.start()
            except TimeoutError:  # loading 100k entries on a busy machine can take a while
                assert gw.proc is not None
                wait_http(gw.url + "/healthz", gw.proc, timeout=900)
        print("\n| entries in namespace | lookup p50 | lookup p99 | embed p50 | embed p99 |\n|---|---|---|---|---|")
        for n in fill:
            client = gw.async_client(keys[f"fill-{n}"], timeout=60)
            before = httpx.get(gw.url + "/metrics").text
            await ask_all(client, [p.b for p in pairs])
            after = httpx.get(gw.url + "/metrics").text
            figures = []
            for name in ("costgate_cache_lookup_seconds", "costgate_cache_embed_seconds"):
                bounds, b = histogram(before, name)
                _, a = histogram(after, name)
                figures += [1000 * quantile(bounds, b, a, 0.5), 1000 * quantile(bounds, b, a, 0.99)]
            print(f"| {n:,} | {figures[0]:.2f} ms | {figures[1]:.2f} ms | {figures[2]:.2f} ms | {figures[3]:.2f} ms |")
    finally:
        try:
            gw.stop()
        except subprocess.TimeoutExpired:  # writing a 100k-entry snapshot on a busy machine
            gw.kill()
        fake.stop()
        shutil.rmtree(work, ignore_errors=True)  # the 100k snapshot is ~200 MB
    offline(heldout, Embedder())
    label_ceiling([Pair(r["a"], r["b"], r["duplicate"]) for r in rows], Embedder())
    timings = in_process_timings([p.b for p in pairs], fill)
    print("\nIn process, one thread:", ", ".join(f"{k} {v:.2f}" for k, v in timings.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="?", default=str(DEFAULT_DATA))
    parser.add_argument("--limit", type=int, default=1000,
                        help="held-out pairs sent through the gateway (the README's protocol uses 1,000)")
    parser.add_argument("--fill", default="10000,100000", help="namespace sizes for the latency runs")
    parser.add_argument("--ceiling-only", action="store_true",
                        help="only the label-ceiling count (how right the labels let any verifier be)")
    parser.add_argument("--timings-only", action="store_true",
                        help="only the in-process embed and index timings (run it pinned: taskset -c 0)")
    args = parser.parse_args()
    if args.timings_only:
        questions = [json.loads(line)["b"] for line in Path(args.data).read_text().splitlines()]
        timings = in_process_timings(questions, [int(n) for n in args.fill.split(",")])
        print("In process, one thread:", ", ".join(f"{k} {v:.2f}" for k, v in timings.items()))
        return
    if args.ceiling_only:
        rows = [json.loads(line) for line in Path(args.data).read_text().splitlines()]
        label_ceiling([Pair(r["a"], r["b"], r["duplicate"]) for r in rows], Embedder())
        return
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
