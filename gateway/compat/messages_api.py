"""Anthropic's Messages API through the pipeline: `POST /v1/messages`.

`read` checks `anthropic-version`, parses the client's body and hands the pipeline the Chat
Completions translation; the shape turns the chat answer back into a Message, or its stream
into Anthropic's events, and every refusal into Anthropic's error shape (a budget's 402 is a
`billing_error`, which the anthropic SDK raises as PaymentRequiredError). An answer from an
upstream that serves the Messages API itself is relayed as it came.

Cost: a whole answer carries it in `x-costgate-cost-usd`; a stream in its `message_delta`
usage as `cost_usd` (a decimal string) and the SSE comment line, as a chat stream does.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import orjson
from starlette.responses import Response

from gateway.apis.anthropic.anthropic_errors import anthropic_error_response
from gateway.apis.anthropic.headers import api_version
from gateway.apis.anthropic.message import MessageMeta, message_usage, new_message_id, to_message
from gateway.apis.anthropic.messages_request import parse_request
from gateway.apis.anthropic.messages_stream import MessagesStream
from gateway.apis.anthropic.messages_to_chat import to_chat_request
from gateway.apis.chat import ChatUsage
from gateway.compat.chat_stream import translate
from gateway.core.context import Api, NativeRequest, RequestContext
from gateway.core.errors import GatewayError
from gateway.core.tokens import count_messages
from policies.pricing import format_usd


def native_headers(headers: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The client's Messages headers a native upstream is sent: its version and betas."""
    return tuple((name, headers[name]) for name in ("anthropic-version", "anthropic-beta") if name in headers)


class MessagesShape:
    api = Api.MESSAGES

    def __init__(self) -> None:
        self.meta: MessageMeta | None = None  # set once the body is read

    async def read(self, ctx: RequestContext, read_json: Callable[[], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
        """The chat body for the client's Messages body (refused with a 400 when it has none)."""
        version = api_version(ctx.headers)
        body = await read_json()
        req = parse_request(body, version)
        self.meta = MessageMeta(new_message_id(), req.model, tuple(req.stop_sequences or ()))
        dropped: list[str] = []
        chat = to_chat_request(req, dropped)
        ctx.native = NativeRequest(
            Api.MESSAGES, body, headers=native_headers(ctx.headers), translation_dropped=tuple(dropped)
        )
        return chat

    def _meta(self) -> MessageMeta:
        assert self.meta is not None, "an answer comes only after the body was read"
        return self.meta

    async def whole(self, ctx: RequestContext, response: Response) -> Response:
        if ctx.outcome.native_answer:
            return response
        chat = orjson.loads(response.body)
        message = to_message(chat, self._meta())
        if not chat.get("usage"):  # the upstream reported none: what costgate counted and charged
            message["usage"] = message_usage(ChatUsage.of(ctx.meter.usage))
        return Response(orjson.dumps(message), media_type="application/json")

    async def stream(self, ctx: RequestContext, chat: AsyncIterator[Any]) -> AsyncIterator[bytes]:
        if ctx.outcome.native_answer:
            async for piece in chat:
                yield piece
            return
        translator = MessagesStream(
            self._meta(), input_tokens=count_messages(ctx.sent_body["messages"], ctx.asked.model)
        )

        async def finish() -> list[dict[str, Any]]:
            ending = translator.finish(ChatUsage.of(ctx.meter.usage))
            ending[-2]["usage"]["cost_usd"] = format_usd(ctx.meter.cost)  # message_delta; the request is settled
            return ending

        async for piece in translate(ctx, chat, translator, finish):
            yield piece

    def refusal(self, err: GatewayError, request_id: str) -> Response:
        return anthropic_error_response(err, request_id=request_id)
