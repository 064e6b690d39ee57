"""The bundled embedding model: all-MiniLM-L6-v2 (the semantic cache's int8 ONNX graph,
policies/semantic_cache/embedder.py), run in the gateway's process and priced like the chat
engine: the machine's hourly cost over its measured tokens per second.

Why in-process and not a vLLM server: the graph is 23 MB and runs on ONNX Runtime, which the
gateway already has; a query takes milliseconds, less than a loopback hop to another server
would add, and there is nothing to start, warm up or shut down when idle. Calls run one at a
time on their own thread (the event loop keeps serving), and each call's wall time is exact
busy time, so the throughput estimate is measured, not inferred from scrape windows.

```yaml
models:
  - name: minilm-l6
    provider: local
    model: minilm-l6                  # BUNDLED below
    engine: {gpu_hour_usd: 0.10}      # what the machine (its share) costs per hour
```
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np

from engine.config import known_values
from engine.cost import price_per_token
from engine.throughput import DEFAULT_SMOOTHING, RateEstimate, Smoothing, observe_rate
from policies.pricing import Price
from policies.semantic_cache.embedder import DIM, MODEL_DIR, Embedder

# Bundled embedding models by the name a config's `model:` gives: an explicit registry.
BUNDLED = {"minilm-l6": MODEL_DIR, "all-minilm-l6-v2": MODEL_DIR}


@dataclass(frozen=True, slots=True)
class EmbedderSettings:
    gpu_hour_usd: Decimal = Decimal("0")
    tokens_per_second: float = 1000.0  # prior until measured (one core of a small machine: ~1-5k)
    max_tokens: int = 256  # per input; longer ones are cut, as sentence-transformers does for this model
    threads: int = 1
    rate_evidence_tokens: float = DEFAULT_SMOOTHING.min_tokens
    rate_weight: float = DEFAULT_SMOOTHING.weight
    rate_max_step: float = DEFAULT_SMOOTHING.max_step

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> EmbedderSettings:
        settings = cls(**known_values(cls, raw, "settings for a bundled embedding model"))
        if settings.gpu_hour_usd < 0 or settings.tokens_per_second <= 0 or not 1 <= settings.max_tokens <= 512:
            raise ValueError(
                "gpu_hour_usd >= 0, tokens_per_second > 0 and 1 <= max_tokens <= 512 (the model's "
                "positions) are required"
            )
        Smoothing(settings.rate_evidence_tokens, settings.rate_weight, settings.rate_max_step)  # raises if bad
        return settings

    @property
    def smoothing(self) -> Smoothing:
        return Smoothing(self.rate_evidence_tokens, self.rate_weight, self.rate_max_step)


@dataclass(frozen=True, slots=True)
class Embedded:
    vectors: np.ndarray  # (len(texts), DIM) float32, unit rows
    tokens: list[int]  # tokens each text was embedded from (after truncation, [CLS] and [SEP] included)


class LocalEmbedder:
    """One bundled embedding model, its own worker thread and its measured throughput."""

    dimensions = DIM

    def __init__(self, settings: EmbedderSettings, model_dir: Path = MODEL_DIR) -> None:
        self.settings = settings
        self.embedder = Embedder(model_dir, threads=settings.threads, max_tokens=settings.max_tokens)
        self.rate = RateEstimate(settings.tokens_per_second)
        self.calls = 0
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="costgate-embed")

    def count(self, text: str) -> int:
        return len(self.embedder.tokenizer.encode(text).ids)

    async def embed(self, texts: list[str]) -> Embedded:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._worker, self._embed_now, texts)

    def _embed_now(self, texts: list[str]) -> Embedded:
        tokens = [self.count(t) for t in texts]
        began = time.perf_counter()
        vectors = self.embedder.embed_many(texts)
        # Measured on the worker thread, one call at a time: the call's wall time is busy time.
        self.rate = observe_rate(self.rate, sum(tokens), time.perf_counter() - began, self.settings.smoothing)
        self.calls += 1
        return Embedded(vectors, tokens)

    def price(self) -> Price:
        per_token = price_per_token(self.settings.gpu_hour_usd, self.rate.rate)
        return Price(per_token, Decimal(0))  # embeddings have no output tokens

    def status(self) -> dict[str, object]:
        price = self.price()
        return {
            "state": "in-process",
            "calls": self.calls,
            "dimensions": DIM,
            "max_tokens": self.settings.max_tokens,
            "prompt_tokens_per_s": round(self.rate.rate, 3),
            "measured": self.rate.measured,
            "input_usd_per_mtok": str(price.input * 1_000_000),
        }

    def close(self) -> None:
        self._worker.shutdown(wait=False, cancel_futures=True)
