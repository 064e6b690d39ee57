"""`POST /v1/feedback`: a team reports a served answer as wrong (or right) by its request id.

OpenAI has no such endpoint, so this one is as small as it can be and shaped like OpenAI's
others: JSON in (`request_id`, `verdict`, an optional `comment`), an object out
(`"object": "feedback"`), OpenAI's error shape, the caller's own bearer key. Any client reaches
it with the SDK's generic call: `client.post("/feedback", body={...}, cast_to=object)`.

The key is checked before the body is read, the body is capped by RequestGuard (the admin
API's small cap) and the call counts against the key's and team's request rates. A key reports
only its own team's requests. `POST /admin/feedback` (the dashboard's button) takes the same
body with the admin key, for any team.
"""

from __future__ import annotations

import time
from typing import Any, Literal

import orjson
from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.responses import Response

from gateway.core.errors import GatewayError, InvalidRequest, error_response
from gateway.core.wire import parse_json_body
from gateway.routes.admin import require_admin
from gateway.routes.openai import bearer
from gateway.service import gateway_of
from gateway.verdicts import ADMIN, Reported, Reporter
from policies.answer_verdict import Verdict

router = APIRouter()
admin_router = APIRouter(prefix="/admin", dependencies=[Depends(require_admin)])
MAX_COMMENT = 2000


class FeedbackIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    request_id: str = Field(min_length=1, max_length=64)  # the answer's x-costgate-request-id
    verdict: Literal["wrong", "right"]
    comment: str | None = Field(default=None, max_length=MAX_COMMENT)


OPENAPI = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": FeedbackIn.model_json_schema(ref_template="#/components/schemas/{model}")}
        },
    }
}


def _parse(raw: bytes) -> FeedbackIn:
    try:
        return FeedbackIn.model_validate(parse_json_body(raw))
    except ValidationError as err:
        first = err.errors()[0]
        param = ".".join(str(p) for p in first["loc"]) or None
        raise InvalidRequest(f"invalid '{param}': {first['msg']}" if param else first["msg"], param=param) from None


def _json(reported: Reported, **extra: Any) -> Response:
    row, request = reported.row, reported.row.request
    return Response(
        orjson.dumps(
            {
                "object": "feedback",
                "request_id": request.request_id,
                "verdict": row.verdict.value,
                "comment": row.comment,
                "cache": request.cache_status,
                "model": request.served_model,
                "recorded": reported.recorded.value,  # new | changed | same (a repeated verdict changes nothing)
                "purged": reported.purged,
                "labelled": row.pair is not None,
                "updated_at": int(row.updated_at),
                **extra,
            }
        ),
        media_type="application/json",
    )


@router.post("/v1/feedback", openapi_extra=OPENAPI)
async def feedback(request: Request) -> Response:
    gateway = gateway_of(request)
    try:
        principal = await gateway.keys.authenticate(bearer(request))
    except GatewayError as err:
        gateway.metrics.unauthenticated.labels("v1").inc()
        return error_response(err)
    limited = await gateway.spend.count_request(principal, time.time())
    if limited is not None:
        return error_response(limited)
    body = _parse(await request.body())
    reporter = Reporter(principal.key_id, principal.team_id, principal.team_name)
    return _json(await gateway.feedback.report(reporter, body.request_id, Verdict(body.verdict), body.comment))


@admin_router.post("/feedback", openapi_extra=OPENAPI)
async def admin_feedback(request: Request) -> Response:
    body = _parse(await request.body())
    reported = await gateway_of(request).feedback.report(
        Reporter(ADMIN, None), body.request_id, Verdict(body.verdict), body.comment
    )
    return _json(reported, team_id=reported.row.request.team_id)
