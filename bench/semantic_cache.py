"""Semantic cache on Quora question pairs, through a running gateway (fake upstream).

    python bench/semantic_cache.py [--pairs qqp_dev.jsonl] [--labels ADJUDICATED.jsonl ...]
                                   [--limit 2000] [--fill 10000,100000]

Hit quality (issue 12, `bench/cache_quality.py`): the adjudicated protocol at the product's
defaults (`cache: {semantic: {enabled: true}}`, requests without a temperature) — store the `a`
of the first 2,000 dev pairs, ask every `b`, count hits by the hand-adjudicated verdicts and
report the hits they do not cover; the same questions asked by a second team with nothing
stored (no hit may cross teams); then, in process, the verifier's cross-validated figures
and plain cosine's on the same folds. Then lookup latency (index search + entry fetch +
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
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np
import openai

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import cache_quality as quality  # noqa: E402
from bench.cache_labels import DEFAULT_LABELS, DEFAULT_PAIRS, read_labelled  # noqa: E402
from gateway.settings import SemanticCacheConfig  # noqa: E402
from policies.exact_cache import CachedAnswer, request_keys  # noqa: E402
from policies.semantic_cache.calibration import RATES  # noqa: E402
from policies.semantic_cache.embedder import Embedder  # noqa: E402
from policies.semantic_cache.index import VectorIndex  # noqa: E402
from policies.semantic_cache.store import EmbeddedStore, Entry  # noqa: E402
from tests.support import FakeUpstream, GatewayProcess, model, wait_http  # noqa: E402

ONE_CORE = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
CONCURRENCY = 8


@dataclass(frozen=True)
class Pair:
    a: str
    b: str


async def ask_all(client: openai.AsyncOpenAI, texts: list[str]) -> list[tuple[str, str]]:
    """(x-costgate-cache, answer) per text, CONCURRENCY at a time."""
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(text: str) -> tuple[str, str]:
        async with gate:
            raw = await client.chat.completions.with_raw_response.create(
                model="small", temperature=0, messages=[{"role": "user", "content": text}])
            return raw.headers["x-costgate-cache"], raw.parse().choices[0].message.content or ""

    return await asyncio.gather(*(one(t) for t in texts))


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


async def hit_quality(gw: GatewayProcess, pairs: list[Pair], labels: list[Path]) -> None:
    """The adjudicated protocol at the defaults, then the same questions from another team."""
    verdicts = {(c.query, c.stored): c.same for c in read_labelled(labels)}
    asker = gw.async_client(gw.new_key("bench-asker"), timeout=60)
    stored = [p.a for p in pairs]
    await quality.ask_all(asker, stored, quality.STORE_ONLY)
    queries = [p.b for p in pairs]
    result = quality.count(stored, queries, await quality.ask_all(asker, queries, quality.ASK_ONLY), verdicts)
    print(f"\nThrough the gateway at the defaults, no temperature in the requests: {result.line()}")
    for query, source in result.not_covered:
        print(f"  not covered: {query!r} served the answer of {source!r}")
    other = gw.async_client(gw.new_key("bench-other-team"), timeout=60)
    crossed = sum(status != "miss" for status, _ in await quality.ask_all(other, queries, quality.ASK_ONLY))
    print(f"The same {len(queries)} questions from a second team with nothing stored: {crossed} hits")


async def run(args: argparse.Namespace) -> None:
    os.environ.update(ONE_CORE)
    rows = [json.loads(line) for line in open(args.data)]
    pairs = [Pair(r["a"], r["b"]) for r in rows[:args.limit]]
    labels = [Path(p) for p in args.labels]
    fill = [int(x) for x in args.fill.split(",") if x]
    work = Path(tempfile.mkdtemp(prefix="bench-cache-"))
    fill_teams = {f"fill-{n}": {"semantic": True, "max_false_hit_rate": 0.25} for n in fill}
    fake = FakeUpstream(work)
    config = {"models": [model("small", "echo-small", fake.url, "0.15", "0.6")],
              "cache": {"max_entries": 10**6, "semantic": {"enabled": True}, "teams": fill_teams}}
    gw = GatewayProcess(config, work / "gw", env=ONE_CORE)
    keys = {t: gw.new_key(t) for t in fill_teams}
    team_ids = {t["name"]: t["id"] for t in gw.admin("GET", "/admin/teams").json()["data"]}
    load = os.getloadavg()[0]
    print(f"the first {len(pairs)} dev pairs; machine load {load:.1f} on {os.cpu_count()} cores (shared)")
    try:
        await hit_quality(gw, pairs, labels)
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
    quality.print_cross_validated(read_labelled(labels), Embedder().embed_many, RATES,
                                  SemanticCacheConfig().max_false_hit_rate)
    timings = in_process_timings([p.b for p in pairs], fill)
    print("\nIn process, one thread:", ", ".join(f"{k} {v:.2f}" for k, v in timings.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="?", default=str(DEFAULT_PAIRS), help="qqp_dev.jsonl")
    parser.add_argument("--labels", nargs="+", default=[str(p) for p in DEFAULT_LABELS if p.exists()],
                        help="hand-adjudicated candidate hits (JSON lines: query, stored, same)")
    parser.add_argument("--limit", type=int, default=2000,
                        help="dev pairs sent through the gateway (the adjudicated protocol uses the first 2,000)")
    parser.add_argument("--fill", default="10000,100000", help="namespace sizes for the latency runs")
    parser.add_argument("--timings-only", action="store_true",
                        help="only the in-process embed and index timings (run it pinned: taskset -c 0)")
    args = parser.parse_args()
    if args.timings_only:
        questions = [json.loads(line)["b"] for line in Path(args.data).read_text().splitlines()]
        timings = in_process_timings(questions, [int(n) for n in args.fill.split(",")])
        print("In process, one thread:", ", ".join(f"{k} {v:.2f}" for k, v in timings.items()))
        return
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
