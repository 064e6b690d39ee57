"""The check-body stage parses what a request asks once (gateway/core/asked.py): the model and
stream; chargeback tags from the header and `metadata`, after the key's; the trace id; the end
user; the client's cache and cost controls — and refuses malformed headers."""

from __future__ import annotations

import dataclasses
from decimal import Decimal
from typing import Any

import pytest

from gateway.core.asked import MAX_TAGS, Asked, CacheControl
from gateway.core.context import Endpoint, Principal, RequestContext
from gateway.core.errors import InvalidRequest
from gateway.stages.check_body import CheckBody
from tests.gateway.fakes import TEAM_A, request

KEYED = dataclasses.replace(TEAM_A, tags=("env=prod", "app"))
QUESTION = [{"role": "user", "content": "hi"}]


async def tagged(
    headers: dict[str, str] | None = None, body: dict[str, Any] | None = None, principal: Principal | None = KEYED
) -> RequestContext:
    ctx = request({"model": "small", "messages": QUESTION, **(body or {})}, headers=headers, principal=principal)
    assert await CheckBody()(ctx) is None
    return ctx


@pytest.mark.parametrize("stream", [True, False, None])
async def test_what_was_asked_is_parsed_once_with_the_body(stream: bool | None) -> None:
    body = {"model": "small", "messages": QUESTION, "user": "alice"} | ({} if stream is None else {"stream": stream})
    ctx = RequestContext(request_id="r", endpoint=Endpoint.CHAT, body=body, api_key=None, headers={})
    assert ctx.asked == Asked()  # nothing read before the stage: a refusal before it asked for no model
    await CheckBody()(ctx)
    assert ctx.asked == Asked("small", stream=bool(stream), user="alice")
    with pytest.raises(dataclasses.FrozenInstanceError):
        ctx.asked.model = "large"  # type: ignore[misc]


@pytest.mark.parametrize(
    "header, metadata, tags",
    [
        (None, None, ("env=prod", "app")),
        ("search, ranker", None, ("env=prod", "app", "search", "ranker")),
        ("app,search,app", None, ("env=prod", "app", "search")),  # each once, first place kept
        (None, {"feature": "chat", "ab": "b"}, ("env=prod", "app", "feature=chat", "ab=b")),
        ("x", {"feature": "chat"}, ("env=prod", "app", "x", "feature=chat")),
        # metadata is the client's own data: what cannot be a tag is skipped, not refused
        (None, {"note": "two words", "k": "v"}, ("env=prod", "app", "k=v")),
    ],
)
async def test_tags_come_from_the_key_then_the_header_then_metadata(
    header: str | None, metadata: Any, tags: tuple[str, ...]
) -> None:
    headers = {"X-Costgate-Tags": header} if header is not None else {}
    body = {"metadata": metadata} if metadata is not None else {}
    assert (await tagged(headers, body)).tags == tags


async def test_metadata_that_is_not_an_object_is_refused_with_the_body() -> None:
    with pytest.raises(InvalidRequest) as refused:
        await tagged(body={"metadata": "not-an-object"})
    assert (refused.value.status, refused.value.param) == (400, "metadata")


async def test_a_clients_own_tags_are_capped_at_the_first_twenty_and_the_keys_come_on_top() -> None:
    many = ",".join(f"t{i}" for i in range(30))
    assert (await tagged({"x-costgate-tags": many}, principal=TEAM_A)).tags == tuple(f"t{i}" for i in range(MAX_TAGS))
    assert (await tagged({"x-costgate-tags": many})).tags == ("env=prod", "app", *(f"t{i}" for i in range(MAX_TAGS)))


async def test_a_request_without_a_principal_gets_only_its_own_tags() -> None:
    assert (await tagged({"x-costgate-tags": "a"}, principal=None)).tags == ("a",)


@pytest.mark.parametrize(
    "headers, param",
    [
        ({"x-costgate-tags": "ok,not ok"}, "x-costgate-tags"),
        ({"x-costgate-tags": "t" * 65}, "x-costgate-tags"),
        ({"x-costgate-trace-id": ""}, "x-costgate-trace-id"),
        ({"x-costgate-trace-id": "t" * 201}, "x-costgate-trace-id"),
        ({"x-costgate-max-cost-usd": "cheap"}, "x-costgate-max-cost-usd"),
        ({"x-costgate-max-cost-usd": "0"}, "x-costgate-max-cost-usd"),
        ({"x-costgate-max-cost-usd": "-0.5"}, "x-costgate-max-cost-usd"),
        ({"x-costgate-max-cost-usd": "NaN"}, "x-costgate-max-cost-usd"),
    ],
)
async def test_a_malformed_control_header_is_400_naming_the_header(headers: dict[str, str], param: str) -> None:
    ctx = request(headers=headers, principal=KEYED)
    with pytest.raises(InvalidRequest) as refused:
        await CheckBody()(ctx)
    assert (refused.value.status, refused.value.param) == (400, param)


@pytest.mark.parametrize("trace", ["t", "order-42/step-3", "t" * 200])
async def test_the_trace_id_is_kept_as_sent(trace: str) -> None:
    assert (await tagged({"x-costgate-trace-id": trace})).trace_id == trace


async def test_no_trace_header_means_no_trace() -> None:
    assert (await tagged()).trace_id is None


@pytest.mark.parametrize("user, kept", [("alice@example.com", "alice@example.com"), ("", None), (None, None)])
async def test_the_end_user_is_openais_user_field_when_it_is_a_string(user: Any, kept: str | None) -> None:
    body = {} if user is None else {"user": user}
    assert (await tagged(body=body)).asked.user == kept


@pytest.mark.parametrize(
    "header, flags",
    [
        (None, CacheControl.DEFAULT),
        ("no-cache", CacheControl.NO_CACHE),
        ("no-store", CacheControl.NO_STORE),
        ("No-Cache, no-store", CacheControl.NO_CACHE | CacheControl.NO_STORE),
    ],
)
async def test_the_cache_header_becomes_the_requests_cache_control(header: str | None, flags: CacheControl) -> None:
    ctx = await tagged({"x-costgate-cache": header} if header is not None else {})
    assert ctx.asked.cache_control == flags


@pytest.mark.parametrize("header, cost", [(None, None), ("0.002", Decimal("0.002")), (" 1 ", Decimal(1))])
async def test_the_max_cost_header_becomes_a_decimal(header: str | None, cost: Decimal | None) -> None:
    ctx = await tagged({"x-costgate-max-cost-usd": header} if header is not None else {})
    assert ctx.asked.max_cost == cost
