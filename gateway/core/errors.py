"""Every error costgate answers with, mapped to OpenAI's error shape by one handler.

The tree (HTTP status, OpenAI `type`, `code`):

    GatewayError                     500  api_error
    ├── InvalidRequest               400  invalid_request_error
    │   └── BodyTooLarge             413  invalid_request_error  request_too_large
    ├── AuthenticationFailed         401  authentication_error   invalid_api_key
    ├── PermissionDenied             403  permission_error       model_not_allowed
    ├── NotFound                     404  invalid_request_error  model_not_found / not_found
    ├── BudgetExceeded               402  budget_exceeded        budget_exceeded
    │   └── CostLimitExceeded        402  budget_exceeded        cost_limit_exceeded
    ├── RateLimited                  429  rate_limit_error       rate_limit_exceeded (+ retry-after)
    ├── UpstreamError                502  upstream_error         bad_gateway
    │   ├── UpstreamNotFound         404  (the provider's)       (the provider's, else upstream_not_found)
    │   ├── UpstreamTimeout          504  upstream_error         upstream_timeout
    │   ├── UpstreamRateLimited      429  rate_limit_error       upstream_rate_limited
    │   ├── CircuitOpen              503  service_unavailable    circuit_open (+ retry-after)
    │   └── EngineStarting           503  service_unavailable    engine_starting (+ retry-after)
    ├── ProviderBatchEnded           408  batch_error            batch_expired / batch_cancelled / batch_failed
    └── Unavailable                  503  service_unavailable    unavailable (+ retry-after)

An error the provider answered keeps the provider's `type`, `code` and `param` (the instance's
`type` and `code` replace the class's), so a client sees `context_length_exceeded` on `messages`
as it would from the provider itself. Messages of errors costgate makes name no host, port or
library: a client cannot act on them, and they describe the operator's network.

Stages raise these; `error_response` turns one into a response. Anything else that escapes is
a bug: the edge (gateway/edge/request_ids.py) logs it and answers 500 in the same shape, with
the request's id.
"""

from __future__ import annotations

import orjson
from starlette.responses import Response


class GatewayError(Exception):
    status = 500
    type = "api_error"
    code: str | None = "internal_error"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        param: str | None = None,
        retry_after: float | None = None,
        error_type: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if error_type is not None:
            self.type = error_type  # the provider's own type, kept (see the module's docstring)
        self.param = param
        self.retry_after = retry_after


class InvalidRequest(GatewayError):
    status = 400
    type = "invalid_request_error"
    code = "invalid_request"


class BodyTooLarge(InvalidRequest):
    status = 413
    code = "request_too_large"


class AuthenticationFailed(GatewayError):
    status = 401
    type = "authentication_error"
    code = "invalid_api_key"


class PermissionDenied(GatewayError):
    status = 403
    type = "permission_error"
    code = "model_not_allowed"


class NotFound(GatewayError):
    status = 404
    type = "invalid_request_error"
    code = "not_found"


class BudgetExceeded(GatewayError):
    status = 402
    type = "budget_exceeded"
    code = "budget_exceeded"


class CostLimitExceeded(BudgetExceeded):
    """No model fits the request's `x-costgate-max-cost-usd`."""

    code = "cost_limit_exceeded"


class RateLimited(GatewayError):
    status = 429
    type = "rate_limit_error"
    code = "rate_limit_exceeded"


class UpstreamError(GatewayError):
    status = 502
    type = "upstream_error"
    code = "bad_gateway"
    deployment_fault = True  # counts against the deployment's circuit breaker


class UnreadableAnswer(UpstreamError):
    """The upstream answered 2xx with a body the gateway cannot read (not JSON, not an object, not
    the stream asked for, no choices). The provider billed the call: it is charged at its worst
    case (gateway/upstream/calls.py `billed_if_unread`), never at $0."""

    code = "bad_upstream_body"


class UpstreamNotFound(UpstreamError):
    """The provider answered 404: the upstream lacks the model or the path the deployment names
    (a configuration matter, not the request's fault; a fallback may still answer)."""

    status = 404
    type = "invalid_request_error"
    code = "upstream_not_found"


class UpstreamTimeout(UpstreamError):
    status = 504
    code = "upstream_timeout"


class UpstreamRateLimited(UpstreamError):
    status = 429
    type = "rate_limit_error"
    code = "upstream_rate_limited"


class CircuitOpen(UpstreamError):
    """Every deployment that could answer has its circuit breaker open."""

    status = 503
    type = "service_unavailable"
    code = "circuit_open"


class EngineStarting(UpstreamError):
    """A local model's engine is starting (engine/cold_start.py): its fallbacks, or a cascade's
    next tier, answer instead; alone, the client is told when to retry."""

    status = 503
    type = "service_unavailable"
    code = "engine_starting"
    deployment_fault = False  # a start is not a failure: the breaker must not open over it


class ProviderBatchEnded(GatewayError):
    """A provider's batch ended (expired, was cancelled, failed) without answering a line: the
    provider billed nothing for it. Not an upstream fault: no breaker counts it, no fallback or
    retry runs the line elsewhere (the caller's batch ended, or its provider refused the file)."""

    status = 408
    type = "batch_error"
    code = "batch_expired"

    @classmethod
    def of(cls, provider_status: str) -> ProviderBatchEnded:
        code = {"cancelled": "batch_cancelled", "failed": "batch_failed"}.get(provider_status, "batch_expired")
        return cls(f"the provider's batch ended ({provider_status}) before this line was answered", code=code)


class Unavailable(GatewayError):
    status = 503
    type = "service_unavailable"
    code = "unavailable"


def error_body(err: GatewayError) -> bytes:
    return orjson.dumps({"error": {"message": err.message, "type": err.type, "param": err.param, "code": err.code}})


def error_response(err: GatewayError, headers: dict[str, str] | None = None) -> Response:
    all_headers = dict(headers or {})
    if err.retry_after is not None:
        all_headers["retry-after"] = str(max(1, round(err.retry_after)))
    if isinstance(err, BodyTooLarge):
        # Else the server reads (and drops) the rest of a huge body to keep the connection.
        all_headers["connection"] = "close"
    return Response(error_body(err), status_code=err.status, headers=all_headers, media_type="application/json")
