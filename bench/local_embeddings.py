"""The bundled embedding model's throughput and the price it gives (engine/embeddings.py).

    python bench/local_embeddings.py [--seconds 5] [--gpu-hour 0.10]

Short queries (~10 tokens) and 256-token passages, one text per call and 32 per call, each for
`--seconds` through `LocalEmbedder` (its worker thread, as the gateway calls it): tokens/s
(the model's own tokens, [CLS]/[SEP] included), then the price per million tokens at the
machine's hourly cost, beside what litellm's price map says OpenAI's text-embedding-3-small
costs (the API it would replace; not measured).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.cost import price_per_token  # noqa: E402
from engine.embeddings import EmbedderSettings, LocalEmbedder  # noqa: E402

SHORT = "What is the capital of France?"
PASSAGE = " ".join(["The gateway routes each request to the cheapest model that is good enough."] * 20)


async def rate(embedder: LocalEmbedder, text: str, per_call: int, seconds: float) -> float:
    tokens, began = 0, time.perf_counter()
    while time.perf_counter() - began < seconds:
        done = await embedder.embed([text] * per_call)
        tokens += sum(done.tokens)
    return tokens / (time.perf_counter() - began)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--gpu-hour", default="0.10")
    args = parser.parse_args()
    hour = Decimal(args.gpu_hour)
    embedder = LocalEmbedder(EmbedderSettings(gpu_hour_usd=hour))
    print(f"tokens per text: short {embedder.count(SHORT)}, passage {embedder.count(PASSAGE)}")
    await embedder.embed([SHORT])  # warm-up
    for name, text in (("short query", SHORT), ("256-token passage", PASSAGE)):
        for per_call in (1, 32):
            tps = await rate(embedder, text, per_call, args.seconds)
            per_m = price_per_token(hour, tps) * 1_000_000
            print(f"{name}, {per_call} per call: {tps:,.0f} tok/s -> ${per_m:.4f} per 1M tokens at ${hour}/h")
    import os

    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from policies.price_map import lookup

    info = lookup("text-embedding-3-small")
    if info is not None:
        print(f"text-embedding-3-small (price map): ${info.price.input * 1_000_000} per 1M tokens")
    print(
        f"estimate in force after the run: {embedder.rate.rate:,.0f} tok/s "
        f"(${embedder.price().input * 1_000_000:.4f} per 1M tokens)"
    )
    embedder.close()


if __name__ == "__main__":
    asyncio.run(main())
