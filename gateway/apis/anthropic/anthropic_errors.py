"""costgate's errors (gateway/core/errors.py) in Anthropic's shape:
`{"type": "error", "error": {"type": ..., "message": ...}, "request_id": ...}`.

The HTTP status stays costgate's own; the type is Anthropic's name for that status:

    400 invalid_request_error   401 authentication_error   402 billing_error (a budget)
    403 permission_error        404 not_found_error        413 request_too_large
    429 rate_limit_error        500 api_error              502 api_error (the upstream)
    503 overloaded_error        504 timeout_error
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import Response

from gateway.core.errors import GatewayError

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    502: "api_error",
    503: "overloaded_error",
    504: "timeout_error",
}


def error_type(status: int) -> str:
    """Anthropic's type for a status; other 4xx are invalid requests, other 5xx API errors."""
    return ERROR_TYPES.get(status, "invalid_request_error" if status < 500 else "api_error")


def anthropic_error(err: GatewayError, request_id: str | None = None) -> dict[str, Any]:
    """The body of an error answer, and of a stream's `error` event."""
    body: dict[str, Any] = {"type": "error", "error": {"type": error_type(err.status), "message": err.message}}
    if request_id is not None:
        body["request_id"] = request_id
    return body


def anthropic_error_response(
    err: GatewayError, headers: dict[str, str] | None = None, request_id: str | None = None
) -> Response:
    all_headers = dict(headers or {})
    if err.retry_after is not None:
        all_headers["retry-after"] = str(max(1, round(err.retry_after)))
    if request_id is not None:
        all_headers["request-id"] = request_id
    return Response(
        orjson.dumps(anthropic_error(err, request_id)),
        status_code=err.status,
        headers=all_headers,
        media_type="application/json",
    )
