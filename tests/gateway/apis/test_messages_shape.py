"""The Messages API's shape around the pipeline (gateway/compat/messages_api.py) on its own: the
client's body read into a chat request (its own kept for a native upstream), a chat answer
turned into a Message (with the usage costgate counted when the upstream sent none), a native
answer relayed untouched, and a refusal in Anthropic's error shape. The translations themselves
are test_anthropic_request.py's and test_anthropic_message.py's; a running gateway is
tests/gateway/test_messages_api.py's."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from starlette.responses import Response

from gateway.compat.messages_api import MessagesShape
from gateway.core.context import Api, RequestContext
from gateway.core.errors import BudgetExceeded, InvalidRequest
from policies.pricing import Usage
from tests.gateway.fakes import TEAM_A, request

BODY = {"model": "small", "max_tokens": 50, "messages": [{"role": "user", "content": "hi"}]}
CHAT = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 0,
    "model": "upstream-model",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "hello"}, "finish_reason": "stop"}],
}


async def read(body: dict[str, Any], headers: dict[str, str] | None = None) -> tuple[MessagesShape, RequestContext]:
    shape, ctx = MessagesShape(), request({}, headers=headers, principal=TEAM_A)

    async def read_json() -> dict[str, Any]:
        return body

    ctx.body = await shape.read(ctx, read_json)
    return shape, ctx


async def test_the_body_is_read_into_a_chat_request_and_kept_for_a_native_upstream() -> None:
    _, ctx = await read(BODY, {"anthropic-version": "2023-06-01"})
    assert ctx.body["model"] == "small" and ctx.body["max_completion_tokens"] == 50
    assert ctx.body["messages"] == [{"role": "user", "content": "hi"}]
    assert ctx.native is not None and (ctx.native.api, ctx.native.body) == (Api.MESSAGES, BODY)


async def test_an_unknown_anthropic_version_is_refused() -> None:
    with pytest.raises(InvalidRequest) as err:
        await read(BODY, {"anthropic-version": "1999-01-01"})
    assert err.value.param == "anthropic-version"


@pytest.mark.parametrize(
    "upstream_usage, expected",
    [
        ({"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11}, (9, 2)),  # the upstream's
        (None, (7, 3)),  # none sent: what costgate counted and charged
    ],
)
async def test_a_chat_answer_becomes_a_message(upstream_usage: dict | None, expected: tuple[int, int]) -> None:
    shape, ctx = await read(BODY)
    ctx.meter.usage = Usage(prompt_tokens=7, completion_tokens=3)
    chat = {**CHAT, **({"usage": upstream_usage} if upstream_usage else {})}
    message = orjson.loads((await shape.whole(ctx, Response(orjson.dumps(chat)))).body)
    assert message["type"] == "message" and message["role"] == "assistant" and message["id"].startswith("msg_")
    assert message["model"] == "small"  # the name the client asked for, not the upstream's
    assert message["content"] == [{"type": "text", "text": "hello"}]
    assert message["stop_reason"] == "end_turn"
    assert (message["usage"]["input_tokens"], message["usage"]["output_tokens"]) == expected


async def test_a_native_answer_is_relayed_untouched() -> None:
    shape, ctx = await read(BODY)
    ctx.outcome.native_answer = True
    native = Response(b'{"type": "message", "id": "msg_upstream"}', media_type="application/json")
    assert await shape.whole(ctx, native) is native


async def test_a_refusal_is_an_anthropic_error() -> None:
    response = MessagesShape().refusal(BudgetExceeded("over budget", code="budget_exceeded"), "req_9")
    assert response.status_code == 402 and response.headers["request-id"] == "req_9"
    body = orjson.loads(response.body)
    assert body["type"] == "error" and body["error"]["type"] == "billing_error"
