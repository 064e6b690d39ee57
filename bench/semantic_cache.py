"""Semantic cache on Quora question pairs, through a running gateway (fake upstream).

    python bench/semantic_cache.py [--pairs qqp_dev.jsonl] [--labels ADJUDICATED.jsonl ...]
                                   [--limit 2000]

Hit quality (issue 12, `bench/cache_quality.py`): the adjudicated protocol at the product's
defaults (`cache: {semantic: {enabled: true}}`, requests without a temperature) — store the `a`
of the first 2,000 dev pairs, ask every `b`, count hits by the hand-adjudicated verdicts and
report the hits they do not cover; the same questions asked by a second team with nothing
stored (no hit may cross teams); then, in process, the verifier's cross-validated figures
and plain cosine's on the same folds. What the cache costs on the miss path (issue 12 item 4)
is measured by bench/semantic_cache_speed.py.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import openai

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import cache_quality as quality  # noqa: E402
from bench.cache_labels import DEFAULT_LABELS, DEFAULT_PAIRS, read_labelled  # noqa: E402
from gateway.config.settings import SemanticCacheConfig  # noqa: E402
from policies.semantic_cache.embedder import Embedder  # noqa: E402
from policies.semantic_cache.verifier_calibration import RATES  # noqa: E402
from tests.support import FakeUpstream, GatewayProcess, model  # noqa: E402

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
                model="small", temperature=0, messages=[{"role": "user", "content": text}]
            )
            return raw.headers["x-costgate-cache"], raw.parse().choices[0].message.content or ""

    return await asyncio.gather(*(one(t) for t in texts))


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
    pairs = [Pair(r["a"], r["b"]) for r in rows[: args.limit]]
    labels = [Path(p) for p in args.labels]
    work = Path(tempfile.mkdtemp(prefix="bench-cache-"))
    fake = FakeUpstream(work)
    config = {
        "models": [model("small", "echo-small", fake.url, "0.15", "0.6")],
        "cache": {"max_entries": 10**6, "semantic": {"enabled": True}},
    }
    gw = GatewayProcess(config, work / "gw", env=ONE_CORE)
    load = os.getloadavg()[0]
    print(f"the first {len(pairs)} dev pairs; machine load {load:.1f} on {os.cpu_count()} cores (shared)")
    try:
        await hit_quality(gw, pairs, labels)
    finally:
        gw.stop()
        fake.stop()
        shutil.rmtree(work, ignore_errors=True)
    quality.print_cross_validated(
        read_labelled(labels), Embedder().embed_many, RATES, SemanticCacheConfig().max_false_hit_rate
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="?", default=str(DEFAULT_PAIRS), help="qqp_dev.jsonl")
    parser.add_argument(
        "--labels",
        nargs="+",
        default=[str(p) for p in DEFAULT_LABELS if p.exists()],
        help="hand-adjudicated candidate hits (JSON lines: query, stored, same)",
    )
    parser.add_argument(
        "--limit",
        type=int,
        default=2000,
        help="dev pairs sent through the gateway (the adjudicated protocol uses the first 2,000)",
    )
    args = parser.parse_args()
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
