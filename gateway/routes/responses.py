"""OpenAI's Responses API: `POST /v1/responses` through the pipeline (gateway/compat/responses_api.py),
the team's stored responses (`GET` and `DELETE /v1/responses/{id}`, `GET
/v1/responses/{id}/input_items`), and `POST /v1/responses/input_tokens`, counted by costgate
without an upstream call."""

from __future__ import annotations

import time

import anyio
import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.apis.responses.response_chain import (
    StoredResponse,
    continued,
    deleted,
    input_item_page,
    visible,
)
from gateway.apis.responses.responses_request import parse_request
from gateway.apis.responses.responses_to_chat import to_chat_request
from gateway.compat.responses_api import ResponsesShape
from gateway.core.context import Endpoint
from gateway.core.errors import GatewayError, InvalidRequest, error_response
from gateway.core.tokens import count_conversation
from gateway.core.wire import parse_json_body
from gateway.routes.openai import bearer, read_body, serve
from gateway.service import gateway_of
from gateway.stages.authenticate import check_model

MAX_ITEMS_PAGE = 100  # OpenAI's bound on `limit`


async def create(request: Request) -> Response:
    gateway = gateway_of(request)
    return await serve(request, Endpoint.CHAT, bearer(request), ResponsesShape(gateway.responses))


async def _stored(request: Request) -> StoredResponse:
    gateway = gateway_of(request)
    principal = await gateway.keys.authenticate(bearer(request))
    response_id = request.path_params["response_id"]
    return visible(await gateway.responses.get(response_id), principal.team_id, response_id)


async def read(request: Request) -> Response:
    try:
        stored = await _stored(request)
    except GatewayError as err:
        return error_response(err)
    return Response(orjson.dumps(stored.response), media_type="application/json")


async def remove(request: Request) -> Response:
    try:
        stored = await _stored(request)
    except GatewayError as err:
        return error_response(err)
    await gateway_of(request).responses.delete(stored.id)
    return Response(orjson.dumps(deleted(stored.id)), media_type="application/json")


async def list_input_items(request: Request) -> Response:
    params = request.query_params
    try:
        stored = await _stored(request)
        order = params.get("order", "desc")
        if order not in ("asc", "desc"):
            raise InvalidRequest("order must be 'asc' or 'desc'", param="order")
        limit = params.get("limit", "20")
        if not limit.isdigit() or not 1 <= int(limit) <= MAX_ITEMS_PAGE:
            raise InvalidRequest(f"limit must be a whole number from 1 to {MAX_ITEMS_PAGE}", param="limit")
        page = input_item_page(stored, order, int(limit), params.get("after"))
    except GatewayError as err:
        return error_response(err)
    return Response(orjson.dumps(page), media_type="application/json")


async def count_input_tokens(request: Request) -> Response:
    """`{"object": "response.input_tokens", "input_tokens": n}`: tiktoken on the chat translation
    (with the `previous_response_id` conversation before it) and its tools, as
    /v1/messages/count_tokens counts (an estimate for models with another tokenizer), bounded
    as it is: counted against the request rates before the body is read, counted on a thread."""
    gateway = gateway_of(request)
    try:
        principal = await gateway.keys.authenticate(bearer(request))
        limited = await gateway.spend.count_request(principal, time.time())
        if limited is not None:
            raise limited
        req = parse_request(parse_json_body(await read_body(request, gateway.settings.max_body_bytes)))
        check_model(principal, req.model, gateway.targets)
        history = await continued(gateway.responses.get, req.previous_response_id, principal.team_id)
        chat = to_chat_request(req, history or ())
    except GatewayError as err:
        return error_response(err)
    tokens = await anyio.to_thread.run_sync(count_conversation, chat, req.model)
    return Response(
        orjson.dumps({"object": "response.input_tokens", "input_tokens": tokens}), media_type="application/json"
    )


def routes() -> list[Route]:
    return [
        Route("/v1/responses", create, methods=["POST"]),
        Route("/v1/responses/input_tokens", count_input_tokens, methods=["POST"]),
        Route("/v1/responses/{response_id}/input_items", list_input_items, methods=["GET"]),
        Route("/v1/responses/{response_id}", read, methods=["GET"]),
        Route("/v1/responses/{response_id}", remove, methods=["DELETE"]),
    ]
