"""Anthropic's Messages API: `POST /v1/messages` through the pipeline (gateway/compat/messages_api.py),
and `POST /v1/messages/count_tokens`, counted by costgate without an upstream call. The key may
come as `x-api-key` or a bearer token; errors are in Anthropic's shape."""

from __future__ import annotations

import time

import anyio
import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.apis.anthropic.anthropic_errors import anthropic_error_response
from gateway.apis.anthropic.headers import api_key, api_version
from gateway.apis.anthropic.messages_request import parse_count_tokens
from gateway.apis.anthropic.messages_to_chat import conversation_body
from gateway.compat.messages_api import MessagesShape
from gateway.core.context import Endpoint
from gateway.core.errors import GatewayError
from gateway.core.tokens import count_conversation
from gateway.core.wire import parse_json_body
from gateway.edge import request_ids
from gateway.routes.openai import read_body, serve
from gateway.service import gateway_of
from gateway.stages.authenticate import check_model


async def create(request: Request) -> Response:
    return await serve(request, Endpoint.CHAT, api_key(request.headers), MessagesShape())


async def count_tokens(request: Request) -> Response:
    """`{"input_tokens": n}`: tiktoken on the translated conversation and its tools (an estimate
    for models with another tokenizer). Bounded as the pipeline's endpoints are: counted against
    the key's and team's request rates before its body is read (up to the same body limit), and
    counted on a worker thread, so a long body never stalls the event loop."""
    gateway = gateway_of(request)
    request_id = request_ids.request_id(request.scope)
    try:
        principal = await gateway.keys.authenticate(api_key(request.headers))
        limited = await gateway.spend.count_request(principal, time.time())
        if limited is not None:
            raise limited
        version = api_version(request.headers)
        body = parse_json_body(await read_body(request, gateway.settings.max_body_bytes))
        chat = conversation_body(parse_count_tokens(body, version))
        model = chat["model"]
        check_model(principal, model, gateway.targets)
    except GatewayError as err:
        return anthropic_error_response(err, request_id=request_id)
    tokens = await anyio.to_thread.run_sync(count_conversation, chat, model)
    return Response(
        orjson.dumps({"input_tokens": tokens}), media_type="application/json", headers={"request-id": request_id}
    )


def routes() -> list[Route]:
    return [
        Route("/v1/messages", create, methods=["POST"]),
        Route("/v1/messages/count_tokens", count_tokens, methods=["POST"]),
    ]
