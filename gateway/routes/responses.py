"""OpenAI's Responses API: `POST /v1/responses` through the pipeline (gateway/compat/responses.py),
and the team's stored responses, `GET` and `DELETE /v1/responses/{id}`."""

from __future__ import annotations

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.apis.responses.store import StoredResponse, deleted, visible
from gateway.compat.responses import ResponsesShape
from gateway.context import Endpoint
from gateway.errors import GatewayError, error_response
from gateway.routes.openai import bearer, serve


async def create(request: Request) -> Response:
    gateway = request.app.state.gateway
    return await serve(request, Endpoint.CHAT, bearer(request), ResponsesShape(gateway.responses))


async def _stored(request: Request) -> StoredResponse:
    gateway = request.app.state.gateway
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
    await request.app.state.gateway.responses.delete(stored.id)
    return Response(orjson.dumps(deleted(stored.id)), media_type="application/json")


def routes() -> list[Route]:
    return [
        Route("/v1/responses", create, methods=["POST"]),
        Route("/v1/responses/{response_id}", read, methods=["GET"]),
        Route("/v1/responses/{response_id}", remove, methods=["DELETE"]),
    ]
