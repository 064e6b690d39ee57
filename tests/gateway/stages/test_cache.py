"""The exact cache stage over the real response cache (tests/gateway/stages/cache_support.py):
who may use the cache, the hit served at $0 (whole and streamed), what settle stores and what it
must not, and the client's controls."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from starlette.responses import Response, StreamingResponse

from gateway.core.asked import CacheControl
from gateway.core.context import CacheStatus, Endpoint, RequestContext
from tests.gateway.fakes import TEAM_A, request
from tests.gateway.stages.cache_support import (
    SAVED,
    TEAM_B,
    BrokenStore,
    answered,
    ask,
    cache,
    lookups,
    metric,
    miss_then_store,
    stages,
    store_streamed,
)


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
    _, exact = await store_streamed(["Par", "is."])
    response = await exact(ask())
    assert response is not None
    body = orjson.loads(response.body)
    assert body["choices"][0]["message"]["content"] == "Paris."
    assert body["choices"][0]["finish_reason"] == "stop" and body["model"] == "small"  # as asked
    assert body["usage"]["completion_tokens"] == 500


@pytest.mark.parametrize("pieces, tools", [([], None), (["Calling f"], [{"type": "function"}])])
async def test_a_streamed_answer_without_text_or_with_tools_is_not_stored(pieces: list[str], tools: Any) -> None:
    c, _ = await store_streamed(pieces, **({"tools": tools} if tools else {}))
    assert await c.store.count() == 0


@pytest.mark.parametrize("finish_reason", ["content_filter", None])
async def test_a_streamed_answer_that_was_filtered_or_never_ended_is_not_stored(finish_reason: str | None) -> None:
    c, _ = await store_streamed(["Par"], finish_reason)
    assert await c.store.count() == 0


async def test_a_streamed_answer_cut_at_its_length_replays_as_cut() -> None:
    _, exact = await store_streamed(["Paris is the capital of"], "length")
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
