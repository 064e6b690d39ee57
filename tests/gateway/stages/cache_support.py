"""The cache stages' test bench: the real response cache on an in-memory store with only the
embedding model faked (a table of vectors), requests as the stages see them, and what route or
a relay leaves on a context. Shared by test_cache.py (the exact stage) and
test_semantic_cache_stage.py."""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import numpy as np
from prometheus_client import CollectorRegistry

from gateway.caching.response_cache import CacheMetrics, ResponseCache
from gateway.config.settings import CacheConfig
from gateway.core.asked import CacheControl
from gateway.core.context import Endpoint, Principal, RequestContext
from gateway.stages.cache import ExactCache, SemanticCache, cache_stages
from policies.pricing import Usage
from policies.semantic_cache.embedder import DIM
from policies.semantic_cache.store import EmbeddedStore, Entry, QuestionVectors
from tests.gateway.fakes import TEAM_A, chat_answer, deployment, request

TEAM_B = Principal(team_id="team_b1", team_name="team-b", key_id="key_b1")
DEPLOYMENTS = {"small": deployment("small", upstream="small-v1", input_per_mtok="1", output_per_mtok="2")}
USAGE = Usage(1000, 500)
SAVED = Decimal("0.002")  # USAGE at small's price: 1000 x $1/M + 500 x $2/M


@dataclass
class TableEmbedded(ResponseCache):
    """The response cache with its embedding models faked: a question's vectors (static and
    MiniLM alike) come from `topics` (questions of one topic share a vector), else from a hash
    of its text."""

    topics: dict[str, int] = field(default_factory=dict)
    embedded: list[str] = field(default_factory=list)
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)  # the one `metrics` is on

    async def embed(self, text: str) -> QuestionVectors:
        self.embedded.append(text)
        vector = np.zeros(DIM, dtype=np.float32)
        vector[self.topics.get(text, zlib.crc32(text.encode()) % DIM)] = 1.0
        return QuestionVectors(vector, vector)  # with its MiniLM vector: the search never runs MiniLM


class BrokenStore(EmbeddedStore):
    async def put(self, entry: Entry, vectors: QuestionVectors | None) -> int:
        raise OSError("disk full")


def cache(
    semantic: bool = False, store: EmbeddedStore | None = None, topics: dict[str, int] | None = None, **config: Any
) -> TableEmbedded:
    settings = CacheConfig.model_validate({"semantic": {"enabled": semantic}, **config})
    registry = CollectorRegistry()
    return TableEmbedded(
        settings, store or EmbeddedStore(1000), CacheMetrics(registry), topics=topics or {}, registry=registry
    )


def stages(c: ResponseCache) -> tuple[ExactCache, SemanticCache]:
    exact, semantic = cache_stages(c, DEPLOYMENTS)
    assert isinstance(exact, ExactCache) and isinstance(semantic, SemanticCache)
    return exact, semantic


def ask(
    question: str = "What is the capital of France?",
    principal: Principal = TEAM_A,
    stream: bool = False,
    control: CacheControl = CacheControl.DEFAULT,
    endpoint: Endpoint = Endpoint.CHAT,
    **body: Any,
) -> RequestContext:
    if endpoint is Endpoint.CHAT:
        body = {"model": "small", "messages": [{"role": "user", "content": question}], **body}
    else:
        body = {"model": "small", "prompt": question, **body}
    return request(
        body, principal=principal, stream=stream, endpoint=endpoint, requested_model="small", cache_control=control
    )


def answered(ctx: RequestContext, text: str = "Paris.") -> RequestContext:
    """What route leaves on the context after a successful, non-streamed upstream answer."""
    ctx.outcome.served_model, ctx.meter.usage = "small", USAGE
    ctx.outcome.response_body = chat_answer(text, USAGE, model="small-v1").body
    return ctx


def streamed(ctx: RequestContext, pieces: list[str], finish_reason: str | None = "stop") -> RequestContext:
    """What a streamed answer's relay leaves on the context."""
    ctx.outcome.served_model, ctx.meter.usage, ctx.completion_text = "small", USAGE, pieces
    if finish_reason is not None:
        ctx.outcome.ended(finish_reason)
    return ctx


async def miss_then_store(exact: ExactCache, ctx: RequestContext) -> None:
    assert await exact(ctx) is None
    await exact.settle(answered(ctx))


def metric(c: TableEmbedded, name: str, **labels: str) -> float:
    return c.registry.get_sample_value(name, {"team": "team-a", **labels}) or 0.0


def lookups(c: TableEmbedded, kind: str, result: str) -> float:
    return metric(c, "costgate_cache_lookups_total", kind=kind, result=result)


async def store_streamed(
    pieces: list[str], finish_reason: str | None = "stop", **body: Any
) -> tuple[TableEmbedded, ExactCache]:
    """A streamed miss of `ask(stream=True, **body)` settled with what its relay left; the cache
    and its exact stage, to look in."""
    c = cache()
    exact, _ = stages(c)
    ctx = ask(stream=True, **body)
    await exact(ctx)
    await exact.settle(streamed(ctx, pieces, finish_reason))
    return c, exact
