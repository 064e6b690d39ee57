"""OpenAI's Responses API through the pipeline: `POST /v1/responses`.

`read` parses the client's body, resolves `previous_response_id` from the team's stored
responses, and hands the pipeline the Chat Completions translation; the shape turns the chat
answer (a miss, a cache hit, a cascade's) back into a Response, or its stream into the typed
Responses events, and keeps the Response for `previous_response_id` when the request stores.
An answer from an upstream that serves the Responses API itself is already a Response: it is
relayed as it came, and kept the same way.

Cost: a whole answer carries it in `x-costgate-cost-usd`; a stream in its final Response's
`usage.cost_usd` (a decimal string) and the SSE comment line, as a chat stream does.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import orjson
from sqlalchemy.exc import SQLAlchemyError
from starlette.responses import Response

from gateway.apis.chat import ChatUsage
from gateway.apis.responses.output import ResponseMeta, new_id, response_usage, to_response
from gateway.apis.responses.response_chain import StoredResponse, continued
from gateway.apis.responses.responses_request import ResponsesRequest, parse_request
from gateway.apis.responses.responses_stream import ResponsesStream
from gateway.apis.responses.responses_to_chat import to_chat_request
from gateway.compat.chat_stream import translate, typed_data
from gateway.core.context import Api, NativeRequest, RequestContext
from gateway.core.errors import GatewayError, error_response
from gateway.core.sse import StreamEnd
from gateway.storage.stored_responses import ResponseStore
from policies.pricing import format_usd

log = logging.getLogger("costgate.responses")


class ResponsesShape:
    api = Api.RESPONSES

    def __init__(self, store: ResponseStore) -> None:
        self.store = store
        self.req: ResponsesRequest | None = None  # set once the body is read
        self.meta: ResponseMeta | None = None

    async def read(self, ctx: RequestContext, read_json: Callable[[], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
        """The chat body for the client's Responses body (refused with a 400 or 404 when it has none)."""
        assert ctx.principal is not None, "the route authenticates first"
        body = await read_json()
        req = self.req = parse_request(body)
        history = await continued(self.store.get, req.previous_response_id, ctx.principal.team_id)
        self.meta = ResponseMeta(new_id("resp"), int(ctx.created_at), req.model)
        dropped: list[str] = []
        chat = to_chat_request(req, history or (), dropped)
        ctx.native = NativeRequest(Api.RESPONSES, body, history, translation_dropped=tuple(dropped))
        return chat

    def _request(self) -> tuple[ResponsesRequest, ResponseMeta]:
        assert self.req is not None and self.meta is not None, "an answer comes only after the body was read"
        return self.req, self.meta

    async def whole(self, ctx: RequestContext, response: Response) -> Response:
        req, meta = self._request()
        if ctx.outcome.native_answer:
            await self._keep(ctx, orjson.loads(response.body))
            return response
        out = to_response(orjson.loads(response.body), req, meta)
        if out["usage"] is None:  # the upstream reported none: what costgate counted and charged
            out["usage"] = response_usage(ChatUsage.of(ctx.meter.usage))
        await self._keep(ctx, out)
        return Response(orjson.dumps(out), media_type="application/json")

    async def stream(self, ctx: RequestContext, chat: AsyncIterator[Any]) -> AsyncIterator[bytes]:
        if ctx.outcome.native_answer:
            async for piece in chat:
                event = typed_data(piece) if isinstance(piece, StreamEnd) else None  # the terminal event
                if event is not None and event.get("type") in ("response.completed", "response.incomplete"):
                    await self._keep(ctx, event["response"])
                yield piece
            return
        req, meta = self._request()
        translator = ResponsesStream(req, meta)

        async def finish() -> list[dict[str, Any]]:
            ending = translator.finish(ChatUsage.of(ctx.meter.usage))
            assert translator.response is not None
            translator.response["usage"]["cost_usd"] = format_usd(ctx.meter.cost)  # the request is settled by now
            await self._keep(ctx, translator.response)
            return ending

        async for piece in translate(ctx, chat, translator, finish):
            yield piece

    def refusal(self, err: GatewayError, request_id: str) -> Response:
        return error_response(err)

    async def _keep(self, ctx: RequestContext, response: dict[str, Any]) -> None:
        req, _ = self._request()
        if not req.stores or ctx.principal is None:
            return
        try:
            await self.store.put(StoredResponse.of(req, response, ctx.principal.team_id))
        except SQLAlchemyError:  # the answer is paid for and goes out; only its continuation is lost
            log.exception("storing response %s failed", response.get("id"))
