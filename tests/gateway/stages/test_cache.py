"""The exact and semantic cache stages over the real response cache on an in-memory store, with
only the embedding model faked (a table of vectors): who may use the cache, the hit served at
$0 (whole and streamed), what settle stores and what it must not, the client's controls, and
the semantic hit that needs the verifier's consent, not just a near vector."""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import numpy as np
import orjson
import pytest
from prometheus_client import CollectorRegistry
from starlette.responses import Response, StreamingResponse

from gateway.caching.response_cache import CacheMetrics, ResponseCache
from gateway.config.settings import CacheConfig
from gateway.core.asked import CacheControl
from gateway.core.context import CacheStatus, Endpoint, Principal, RequestContext
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


async def test_a_miss_is_stored_and_the_same_request_is_then_served_at_zero_cost() -> None:
    c = cache()
    exact, _ = stages(c)
    first = ask()
    await miss_then_store(exact, first)
    assert first.outcome.cache_status is CacheStatus.MISS and await c.store.count() == 1
    assert c.registry.get_sample_value("costgate_cache_entries") == 1  # the count the put returned
    again = ask()
    response = await exact(again)
    assert isinstance(response, Response) and not isinstance(response, StreamingResponse)
    body = orjson.loads(response.body)
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "Paris."}
    assert body["model"] == "small" and body["usage"]["cost_usd"] == "0"  # the name asked for, not the upstream's
    assert (body["usage"]["prompt_tokens"], body["usage"]["completion_tokens"]) == (1000, 500)
    assert again.outcome.cache_status is CacheStatus.EXACT and again.outcome.served_model == "small"
    assert again.meter.cost == 0 and again.meter.saved == SAVED
    assert (lookups(c, "exact", "miss"), lookups(c, "exact", "hit")) == (1, 1)
    assert metric(c, "costgate_cache_saved_usd_total", kind="exact") == float(SAVED)
    [entry] = c.store.entries.values()
    assert entry.hits == 1


async def test_a_hit_is_not_stored_again() -> None:
    c = cache()
    exact, _ = stages(c)
    await miss_then_store(exact, ask())
    hit = ask()
    await exact(hit)
    await exact.settle(hit)
    assert metric(c, "costgate_cache_stores_total") == 1


async def test_a_hit_streams_when_streaming_was_asked_with_the_usage_chunk_if_asked() -> None:
    c = cache()
    exact, _ = stages(c)
    await miss_then_store(exact, ask())
    ctx = ask(stream=True, stream_options={"include_usage": True})
    response = await exact(ctx)
    assert isinstance(response, StreamingResponse)
    events = [chunk async for chunk in response.body_iterator]
    assert events[-1] == b"data: [DONE]\n\n"
    data = [orjson.loads(e[len(b"data: ") :]) for e in events if e.startswith(b"data: {")]
    text = "".join(d["choices"][0]["delta"].get("content", "") for d in data if d["choices"])
    assert text == "Paris." and ctx.view.include_usage
    assert data[-1]["usage"]["cost_usd"] == "0" and data[-1]["usage"]["completion_tokens"] == 500


async def test_teams_never_share_an_entry() -> None:
    c = cache()
    exact, _ = stages(c)
    await miss_then_store(exact, ask(principal=TEAM_A))
    other = ask(principal=TEAM_B)
    assert await exact(other) is None and other.outcome.cache_status is CacheStatus.MISS


@pytest.mark.parametrize(
    "case, ctx, config",
    [
        ("embeddings", ask(endpoint=Endpoint.EMBEDDINGS), {}),
        ("hot sampling", ask(temperature=0.7), {}),
        ("several choices", ask(n=2), {}),
        ("logprobs", ask(logprobs=True), {}),
        ("cache off", ask(), {"exact": {"enabled": False}}),
        ("cache off for the team", ask(), {"teams": {"team-a": {"exact": False}}}),
        ("no principal", request(requested_model="small"), {}),
    ],
)
async def test_requests_the_cache_must_not_touch_get_no_decision(
    case: str, ctx: RequestContext, config: dict[str, Any]
) -> None:
    c = cache(**config)
    exact, _ = stages(c)
    assert await exact(ctx) is None
    assert ctx.decided.cache is None
    await exact.settle(answered(ctx))
    assert await c.store.count() == 0


async def test_a_team_that_opted_in_to_sampling_is_cached() -> None:
    c = cache(teams={"team-a": {"max_temperature": 1.0}})
    exact, _ = stages(c)
    await miss_then_store(exact, ask(temperature=0.7))
    assert await exact(ask(temperature=0.7)) is not None
    assert await exact(ask(temperature=0.3)) is None  # another setting, another entry


async def test_no_cache_skips_the_lookup_but_still_stores() -> None:
    c = cache()
    exact, _ = stages(c)
    await miss_then_store(exact, ask())
    ctx = ask(control=CacheControl.NO_CACHE)
    assert await exact(ctx) is None
    assert lookups(c, "exact", "hit") == 0 and ctx.decided.cache is not None
    await exact.settle(answered(ctx, "Paris, France."))
    served = await exact(ask())
    assert served is not None and b"Paris, France." in served.body  # the fresh answer replaced the old


async def test_no_store_reads_but_never_writes() -> None:
    c = cache()
    exact, _ = stages(c)
    ctx = ask(control=CacheControl.NO_STORE)
    await miss_then_store(exact, ctx)
    assert await c.store.count() == 0


def failed(ctx: RequestContext) -> None:
    ctx.outcome.status_code, ctx.outcome.error = 502, "upstream failed"


def tool_call(ctx: RequestContext) -> None:
    message = ctx.outcome.response_body["choices"][0]["message"]  # type: ignore[index]
    message["tool_calls"] = [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]


def unserved(ctx: RequestContext) -> None:
    ctx.outcome.served_model = None


@pytest.mark.parametrize("spoil", [failed, tool_call, unserved])
async def test_only_a_complete_successful_text_answer_is_stored(spoil: Any) -> None:
    c = cache()
    exact, _ = stages(c)
    ctx = ask()
    await exact(ctx)
    spoil(answered(ctx))
    await exact.settle(ctx)
    assert await c.store.count() == 0


async def test_a_streamed_miss_is_stored_from_its_text_and_replays_whole() -> None:
    c = cache()
    exact, _ = stages(c)
    ctx = ask(stream=True)
    await exact(ctx)
    await exact.settle(streamed(ctx, ["Par", "is."]))
    response = await exact(ask())
    assert response is not None
    body = orjson.loads(response.body)
    assert body["choices"][0]["message"]["content"] == "Paris."
    assert body["choices"][0]["finish_reason"] == "stop" and body["model"] == "small"  # as asked
    assert body["usage"]["completion_tokens"] == 500


@pytest.mark.parametrize("pieces, tools", [([], None), (["Calling f"], [{"type": "function"}])])
async def test_a_streamed_answer_without_text_or_with_tools_is_not_stored(pieces: list[str], tools: Any) -> None:
    c = cache()
    exact, _ = stages(c)
    ctx = ask(stream=True, **({"tools": tools} if tools else {}))
    await exact(ctx)
    await exact.settle(streamed(ctx, pieces))
    assert await c.store.count() == 0


@pytest.mark.parametrize("finish_reason", ["content_filter", None])
async def test_a_streamed_answer_that_was_filtered_or_never_ended_is_not_stored(finish_reason: str | None) -> None:
    c = cache()
    exact, _ = stages(c)
    ctx = ask(stream=True)
    await exact(ctx)
    await exact.settle(streamed(ctx, ["Par"], finish_reason))
    assert await c.store.count() == 0


async def test_a_streamed_answer_cut_at_its_length_replays_as_cut() -> None:
    c = cache()
    exact, _ = stages(c)
    ctx = ask(stream=True)
    await exact(ctx)
    await exact.settle(streamed(ctx, ["Paris is the capital of"], "length"))
    response = await exact(ask())
    assert response is not None
    assert orjson.loads(response.body)["choices"][0]["finish_reason"] == "length"  # as a whole answer keeps it


async def test_a_store_that_fails_costs_a_future_hit_not_this_answer() -> None:
    c = cache(store=BrokenStore(1000))
    exact, _ = stages(c)
    await miss_then_store(exact, ask())  # settle must not raise: the settles after it still run
    assert metric(c, "costgate_cache_stores_total") == 0


async def test_a_hit_on_a_model_no_longer_configured_saves_nothing_it_can_price() -> None:
    c = cache()
    exact, _ = stages(c)
    ctx = ask()
    await exact(ctx)
    answered(ctx).outcome.served_model = "retired"
    await exact.settle(ctx)
    hit = ask()
    assert await exact(hit) is not None
    assert hit.outcome.served_model == "retired" and hit.meter.saved == 0 and hit.meter.cost == 0


# --- the semantic stage ---


async def test_a_paraphrase_in_the_same_words_is_served_from_the_semantic_cache() -> None:
    c = cache(semantic=True, topics={"What is the capital of France?": 1, "what is the capital of france": 1})
    exact, semantic = stages(c)
    first = ask()
    await exact(first)
    assert await semantic(first) is None
    await exact.settle(answered(first))
    assert c.embedded == ["What is the capital of France?"]  # the lookup's vector is reused to store
    again = ask("what is the capital of france")
    assert await exact(again) is None  # not the exact request
    response = await semantic(again)
    assert response is not None and b"Paris." in response.body
    assert again.outcome.cache_status is CacheStatus.SEMANTIC and again.meter.saved == SAVED and again.meter.cost == 0
    assert lookups(c, "semantic", "hit") == 1


async def test_a_near_vector_is_not_enough_when_the_verifier_refuses() -> None:
    # Same vector (cosine 1), but the questions name different places: the verifier vetoes.
    c = cache(semantic=True, topics={"What is the capital of France?": 1, "What is the capital of Germany?": 1})
    exact, semantic = stages(c)
    first = ask()
    await exact(first)
    await semantic(first)
    await exact.settle(answered(first))
    other = ask("What is the capital of Germany?")
    await exact(other)
    assert await semantic(other) is None and other.outcome.cache_status is CacheStatus.MISS
    assert lookups(c, "semantic", "miss") == 2


TOOL = {"type": "function", "function": {"name": "Bash", "parameters": {"type": "object"}}}
TURNS = [{"role": r, "content": f"turn {i}"} for i, r in enumerate(["user", "assistant"] * 3)]


@pytest.mark.parametrize(
    "first, paraphrase",
    [
        (ask(tools=[TOOL]), ask("what is the capital of france", tools=[TOOL])),
        (
            request(
                {"model": "small", "messages": [*TURNS, {"role": "user", "content": "What is the capital of France?"}]},
                principal=TEAM_A,
                requested_model="small",
            ),
            request(
                {"model": "small", "messages": [*TURNS, {"role": "user", "content": "what is the capital of france"}]},
                principal=TEAM_A,
                requested_model="small",
            ),
        ),
    ],
    ids=["tools", "long history"],
)
async def test_an_agents_turn_is_never_answered_by_meaning(first: RequestContext, paraphrase: RequestContext) -> None:
    """Issue 29: with tools offered or a long history, a paraphrase is not served from the
    semantic cache (nor is the answer kept by meaning); the exact request still is."""
    c = cache(semantic=True, topics={"What is the capital of France?": 1, "what is the capital of france": 1})
    exact, semantic = stages(c)
    await exact(first)
    assert await semantic(first) is None
    await exact.settle(answered(first))
    await exact(paraphrase)
    assert await semantic(paraphrase) is None and paraphrase.outcome.cache_status is CacheStatus.MISS
    assert c.embedded == []


@pytest.mark.parametrize(
    "case, ctx, config",
    [
        ("semantic off for the team", ask(), {"teams": {"team-a": {"semantic": False}}}),
        ("no decision", ask(temperature=0.9), {}),
        ("no-cache", ask(control=CacheControl.NO_CACHE), {}),
        (
            "no question",
            request(
                {
                    "model": "small",
                    "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:,"}}]}],
                },
                principal=TEAM_A,
                requested_model="small",
            ),
            {},
        ),
    ],
)
async def test_requests_the_semantic_cache_skips_are_never_embedded(
    case: str, ctx: RequestContext, config: dict[str, Any]
) -> None:
    c = cache(semantic=True, **config)
    exact, semantic = stages(c)
    await exact(ctx)
    assert await semantic(ctx) is None
    assert c.embedded == []
