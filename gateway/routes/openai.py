"""OpenAI-compatible routes. Each one only turns HTTP into a RequestContext and hands it to
the pipeline; no route wires a policy of its own."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, Protocol

import orjson
from fastapi import APIRouter, Request
from starlette.requests import ClientDisconnect
from starlette.responses import Response
from starlette.routing import Route

from gateway.apis.anthropic.anthropic_errors import anthropic_error_response
from gateway.apis.anthropic.headers import api_key as anthropic_key
from gateway.apis.anthropic.models import model_info, model_page
from gateway.core.context import Endpoint, RequestContext
from gateway.core.errors import BodyTooLarge, GatewayError, InvalidRequest, NotFound, error_response
from gateway.core.wire import REQUEST_MODELS, parse_json_body
from gateway.edge import request_ids
from gateway.edge.guard import bearer_token
from gateway.pipeline import AnswerShape
from gateway.service import gateway_of

router = APIRouter()


class Shape(AnswerShape, Protocol):
    """An answer shape that also reads its API's body into the pipeline's chat body."""

    async def read(self, ctx: RequestContext, read_json: Callable[[], Awaitable[dict[str, Any]]]) -> dict[str, Any]: ...


async def read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge(f"the request body is larger than {limit} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(f"the request body is larger than {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def bearer(request: Request) -> str | None:
    token = bearer_token(request.headers.get("authorization"))
    return token if token is not None else request.headers.get("api-key")  # Azure-style clients


async def handle(request: Request, endpoint: Endpoint) -> Response:
    return await serve(request, endpoint, bearer(request))


async def serve(request: Request, endpoint: Endpoint, api_key: str | None, shape: Shape | None = None) -> Response:
    """The key is checked before the body is read: a request without a valid one costs a key
    lookup and a counter, never a body read, a parse or a ledger row. With a `shape`, the
    client speaks another API (gateway/compat): its reader translates the body inside the
    pipeline, and the shape answers in the client's API."""
    gateway = gateway_of(request)
    request_id = request_ids.request_id(request.scope)  # the id RequestIds answers with
    headers = {"x-costgate-request-id": request_id, "x-costgate-cost-usd": "0", "x-costgate-cache": "miss"}
    try:
        principal = await gateway.keys.authenticate(api_key)
    except GatewayError as err:
        gateway.metrics.unauthenticated.labels("v1").inc()
        if shape is None:
            return error_response(err, headers)
        response = shape.refusal(err, request_id)
        response.headers.update(headers)
        return response

    async def body() -> dict:
        try:
            raw = await read_body(request, gateway.settings.max_body_bytes)
        except ClientDisconnect:  # nothing to fix and nobody to answer: a refusal, not a traceback
            # (its access-log line says so, with the request's id: gateway/edge/access_log.py)
            raise InvalidRequest(
                "the client disconnected before its request body ended", code="client_disconnected"
            ) from None
        parsed = parse_json_body(raw)
        if not isinstance(parsed, dict):
            raise InvalidRequest("the request body must be a JSON object")
        return parsed

    ctx = RequestContext(
        request_id=request_id,
        endpoint=endpoint,
        body={},
        api_key=api_key,
        headers=request.headers,
        principal=principal,
        api=shape.api if shape is not None else None,
    )
    request_ids.mark_logged(request.scope)  # its access-log line comes when it settles
    if shape is None:
        return await gateway.pipeline.handle(ctx, body)
    return await gateway.pipeline.handle(ctx, partial(shape.read, ctx, body), shape)


def _openapi(endpoint: Endpoint) -> dict:
    schema = REQUEST_MODELS[endpoint].model_json_schema(ref_template="#/components/schemas/{model}")
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


@router.post("/v1/chat/completions", openapi_extra=_openapi(Endpoint.CHAT))
async def chat_completions(request: Request) -> Response:
    return await handle(request, Endpoint.CHAT)


@router.post("/v1/completions", openapi_extra=_openapi(Endpoint.COMPLETIONS))
async def completions(request: Request) -> Response:
    return await handle(request, Endpoint.COMPLETIONS)


@router.post("/v1/embeddings", openapi_extra=_openapi(Endpoint.EMBEDDINGS))
async def embeddings(request: Request) -> Response:
    return await handle(request, Endpoint.EMBEDDINGS)


def hot_routes() -> list[Route]:
    """The three pipeline endpoints as plain Starlette routes, for create_app to match first.
    Their handlers take the raw Request, so FastAPI's per-request dependency solving and
    wrappers are pure overhead (~35 us a request on the bench machine). The FastAPI
    declarations above stay: they describe these endpoints in the OpenAPI document."""
    return [
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
        Route("/v1/completions", completions, methods=["POST"]),
        Route("/v1/embeddings", embeddings, methods=["POST"]),
    ]


def model_object(name: str) -> dict[str, Any]:
    """OpenAI's Model object for a configured model or cascade."""
    return {"id": name, "object": "model", "created": 0, "owned_by": "costgate"}


def _speaks_anthropic(request: Request) -> bool:
    """An Anthropic SDK asks (it always sends `anthropic-version`): answer in its shape, with
    its key header and its errors."""
    return "anthropic-version" in request.headers


def _key(request: Request, anthropic: bool) -> str | None:
    return anthropic_key(request.headers) if anthropic else bearer(request)


def _error(err: GatewayError, anthropic: bool) -> Response:
    return anthropic_error_response(err) if anthropic else error_response(err)


@router.get("/v1/models")
async def list_models(request: Request) -> Response:
    gateway = gateway_of(request)
    anthropic = _speaks_anthropic(request)
    try:
        principal = await gateway.keys.authenticate(_key(request, anthropic))
        allowed = [n for n in gateway.targets if principal.may_use(n)]
        body = model_page(allowed, request.query_params) if anthropic else None
    except GatewayError as err:
        return _error(err, anthropic)
    if body is None:
        body = {"object": "list", "data": [model_object(n) for n in allowed]}
    return Response(orjson.dumps(body), media_type="application/json")


@router.get("/v1/models/{model_id:path}")
async def retrieve_model(request: Request, model_id: str) -> Response:
    """One model, as OpenAI's `GET /v1/models/{model}`. A model the key may not use is as
    unknown as one that does not exist: a key learns nothing of models outside its list."""
    gateway = gateway_of(request)
    anthropic = _speaks_anthropic(request)
    try:
        principal = await gateway.keys.authenticate(_key(request, anthropic))
        if model_id not in gateway.targets or not principal.may_use(model_id):
            raise NotFound(f"The model {model_id!r} does not exist", code="model_not_found", param="model")
    except GatewayError as err:
        return _error(err, anthropic)
    found = model_info(model_id) if anthropic else model_object(model_id)
    return Response(orjson.dumps(found), media_type="application/json")
