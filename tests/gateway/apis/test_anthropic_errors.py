"""Every costgate error in Anthropic's error shape, and the anthropic SDK raising the
exception class a client would catch for it."""

from __future__ import annotations

import anthropic
import httpx2
import orjson
import pytest
from anthropic.types.shared import ErrorResponse

from gateway.apis.anthropic.anthropic_errors import anthropic_error, anthropic_error_response
from gateway.core import errors

CASES = [
    (errors.InvalidRequest("bad"), 400, "invalid_request_error", anthropic.BadRequestError),
    (errors.BodyTooLarge("too big"), 413, "request_too_large", anthropic.ContentTooLargeError),
    (errors.AuthenticationFailed("no key"), 401, "authentication_error", anthropic.AuthenticationError),
    (errors.PermissionDenied("not yours"), 403, "permission_error", anthropic.PermissionDeniedError),
    (errors.NotFound("no such model"), 404, "not_found_error", anthropic.NotFoundError),
    (errors.BudgetExceeded("over budget"), 402, "billing_error", anthropic.PaymentRequiredError),
    (errors.CostLimitExceeded("too dear"), 402, "billing_error", anthropic.PaymentRequiredError),
    (errors.RateLimited("slow down", retry_after=2.4), 429, "rate_limit_error", anthropic.RateLimitError),
    (errors.UpstreamRateLimited("upstream busy"), 429, "rate_limit_error", anthropic.RateLimitError),
    (errors.GatewayError("bug"), 500, "api_error", anthropic.InternalServerError),
    (errors.UpstreamError("bad gateway"), 502, "api_error", anthropic.InternalServerError),
    (errors.UpstreamTimeout("slow upstream"), 504, "timeout_error", anthropic.GatewayTimeoutError),
    (errors.CircuitOpen("all down", retry_after=5), 503, "overloaded_error", anthropic.ServiceUnavailableError),
    (errors.Unavailable("starting"), 503, "overloaded_error", anthropic.ServiceUnavailableError),
]


@pytest.mark.parametrize("err, status, kind, _", CASES)
def test_shape_and_status(err: errors.GatewayError, status: int, kind: str, _: type) -> None:
    response = anthropic_error_response(err, {"x-costgate-request-id": "req_1"}, request_id="req_1")
    body = orjson.loads(response.body)
    assert response.status_code == status
    assert body == {"type": "error", "error": {"type": kind, "message": err.message}, "request_id": "req_1"}
    assert response.headers["request-id"] == "req_1"
    if kind != "request_too_large":  # Anthropic documents it, but the SDK's error union lacks it
        ErrorResponse.model_validate(body)
    if err.retry_after is not None:
        assert response.headers["retry-after"] == str(round(err.retry_after))


@pytest.mark.parametrize("err, status, kind, sdk_error", CASES)
async def test_the_sdk_raises_its_own_class(err: errors.GatewayError, status: int, kind: str, sdk_error: type) -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        headers = {"retry-after": "0"} if status == 429 else {}
        return httpx2.Response(status, json=anthropic_error(err), headers=headers)

    client = anthropic.AsyncAnthropic(
        api_key="k",
        base_url="http://costgate.test",
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
    )
    with pytest.raises(sdk_error) as raised:
        await client.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "hi"}])
    assert raised.value.status_code == status and raised.value.body["error"]["type"] == kind
