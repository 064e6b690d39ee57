"""Memory per cached question in a replica: fill N entries through the gateway's cache layer
(`ResponseCache.store_answer`: the static embedder, the store, the vector index) with distinct
questions, parse each stored question through the cache's parse memo as a lookup that meets it
as a candidate does (the soak's worst case), and read the process's RSS before and after.

    python bench/cache_memory.py                  # 100k entries, both backends
    python bench/cache_memory.py --n 20000 --backend redis --trace   # + top allocators

For the Redis backend the entries live in Redis; what the replica keeps per question is its
static vector in the index, the index's key bookkeeping and the parse memo. For the embedded
backend the replica also holds the entry itself (question and answer text). MiniLM is never
loaded (its size does not grow with the cache): the search gets a stand-in for it.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import hashlib
import json
import os
import subprocess
import sys
import time
import tracemalloc
import uuid
from pathlib import Path

import numpy as np
from prometheus_client import CollectorRegistry

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gateway.caching.response_cache import ResponseCache, build_cache  # noqa: E402
from gateway.config.settings import CacheConfig  # noqa: E402
from policies.exact_cache import CachedAnswer, RequestKeys  # noqa: E402
from policies.semantic_cache.search import TwoStageSearch  # noqa: E402
from policies.semantic_cache.static_embedder import StaticEmbedder  # noqa: E402

QQP = ROOT.parent / "shared" / "data" / "qqp_dev.jsonl"
REDIS_URL = "redis://127.0.0.1:6379/0"
ANSWER = CachedAnswer("An answer of a typical length. " * 8, "stop", "gpt-4o-mini", "gpt-4o-mini", 20, 60)


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def distinct_questions(n: int, qqp: Path) -> list[str]:
    """n distinct questions: the QQP dev questions, then each again with a distinct tail."""
    base = sorted({q for line in qqp.read_text().splitlines() for q in json.loads(line).values() if isinstance(q, str)})
    return [base[i] if i < len(base) else f"{base[i % len(base)]} (case {i // len(base)})" for i in range(n)]


async def no_minilm(texts: list[str]) -> np.ndarray:
    raise AssertionError("the fill never needs MiniLM")


async def fill(cache: ResponseCache, questions: list[str], namespace: str) -> None:
    policy = cache.base
    for question in questions:
        key = hashlib.sha256(f"{namespace}\0{question}".encode()).hexdigest()
        keys = RequestKeys(key, namespace, question)
        await cache.store_answer(keys, "bench-team", "bench", ANSWER, policy, await cache.embed(question))
        cache._parse(question)  # what judging it as a candidate of a later lookup leaves behind


async def measure(backend: str, n: int, questions: list[str], trace: bool) -> float:
    prefix = f"costgate:bench-memory:{uuid.uuid4().hex[:8]}:"
    config = CacheConfig.model_validate(
        {"backend": backend, "redis_prefix": prefix, "max_entries": n * 2, "semantic": {"enabled": True}}
    )
    data_dir = Path(f"/tmp/costgate-cache-memory-{os.getpid()}")
    cache = build_cache(config, REDIS_URL if backend == "redis" else None, str(data_dir), CollectorRegistry())
    if backend == "embedded":
        cache.store.path = None  # type: ignore[attr-defined]  # no snapshot on stop
    cache._search = TwoStageSearch(StaticEmbedder.load(), no_minilm)
    await cache.store.start()
    namespace = hashlib.sha256(b"bench-namespace").hexdigest()
    await fill(cache, questions[:200], namespace + "-warm")  # imports, first blocks, tokenizer warm
    gc.collect()
    if trace:
        tracemalloc.start(1)
    before = rss_bytes()
    started = time.perf_counter()
    await fill(cache, questions, namespace)
    for index in cache.store.indexes.values():  # type: ignore[attr-defined]
        index.settle()
    gc.collect()
    after = rss_bytes()
    per = (after - before) / n
    print(
        f"{backend:9s} {n:,} questions: RSS {before / 2**20:.0f} -> {after / 2**20:.0f} MiB, "
        f"{per:,.0f} bytes a question (fill {time.perf_counter() - started:.0f} s)",
        flush=True,
    )
    if trace:
        for stat in tracemalloc.take_snapshot().statistics("lineno")[:8]:
            print(f"    {stat.size / n:8,.0f} B/question  {stat.traceback}")
        tracemalloc.stop()
    if backend == "redis":
        await cache.purge(None)
        keys = [k async for k in cache.store.redis.scan_iter(match=prefix + "*")]  # type: ignore[attr-defined]
        if keys:
            await cache.store.redis.delete(*keys)  # type: ignore[attr-defined]
    await cache.store.stop()
    return per


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--backend", choices=["embedded", "redis", "both"], default="both")
    parser.add_argument("--trace", action="store_true", help="tracemalloc's top allocators (slower)")
    parser.add_argument("--qqp", type=Path, default=QQP)
    args = parser.parse_args()
    if args.backend == "both":  # one process each: memory one backend freed must not hide the other's
        for backend in ("embedded", "redis"):
            subprocess.run([sys.executable, *sys.argv, "--backend", backend], check=True)
        return
    asyncio.run(measure(args.backend, args.n, distinct_questions(args.n, args.qqp), args.trace))


if __name__ == "__main__":
    main()
