"""Capped retries, backoff and retry-after, and the OpenAI provider's error mapping, with
httpx.MockTransport standing in for the network."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from gateway.core.context import Endpoint
from gateway.core.errors import InvalidRequest, UpstreamError, UpstreamNotFound, UpstreamRateLimited, UpstreamTimeout
from gateway.providers.base import UpstreamCall
from gateway.providers.openai_compatible import OpenAIProvider
from gateway.providers.retry import MAX_RETRY_AFTER_S, Retryable, backoff_s, parse_retry_after, with_retries

CALL = UpstreamCall(Endpoint.CHAT, {"model": "m", "messages": [{"role": "user", "content": "x"}]})
OK = {"choices": [{"message": {"content": "hi"}}], "usage": {"prompt_tokens": 3, "completion_tokens": 1}}


def provider(handler, max_retries: int = 2) -> tuple[OpenAIProvider, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return handler(len(seen))

    return OpenAIProvider(
        "m", "http://upstream/v1", "sk-up", max_retries=max_retries, transport=httpx.MockTransport(record)
    ), seen


@pytest.mark.parametrize(
    "attempt, retry_after, low, high",
    [
        (0, None, 0.05, 0.15),
        (2, None, 0.2, 0.6),
        (0, 1.5, 1.5, 1.5),
        (0, 60, MAX_RETRY_AFTER_S, MAX_RETRY_AFTER_S),
        (0, -3, 0, 0),
    ],
)
def test_backoff(attempt: int, retry_after: float | None, low: float, high: float) -> None:
    assert low <= backoff_s(attempt, retry_after) <= high


@pytest.mark.parametrize(
    "value, parsed", [("2", 2.0), ("0.5", 0.5), (None, None), ("", None), ("Wed, 21 Oct 2026 07:28:00 GMT", None)]
)
def test_parse_retry_after(value: str | None, parsed: float | None) -> None:
    assert parse_retry_after(value) == parsed


async def test_with_retries_stops_after_the_cap() -> None:
    calls, sleeps = [], []

    async def send() -> None:
        calls.append(1)
        raise Retryable("down", status=503)

    async def sleep(s: float) -> None:
        sleeps.append(s)

    with pytest.raises(UpstreamError):
        await with_retries(send, 2, sleep)
    assert len(calls) == 3 and len(sleeps) == 2


async def test_a_long_retry_after_is_not_waited_out() -> None:
    calls = []

    async def send() -> None:
        calls.append(1)
        raise Retryable("slow down", status=429, retry_after=120)

    with pytest.raises(UpstreamRateLimited) as err:
        await with_retries(send, 2)
    assert len(calls) == 1 and err.value.retry_after == 120


async def test_provider_retries_429_honouring_retry_after_then_succeeds() -> None:
    up, seen = provider(
        lambda n: httpx.Response(429, headers={"retry-after": "0"}) if n < 3 else httpx.Response(200, json=OK)
    )
    completion = await up.complete(CALL)
    assert len(seen) == 3 and completion.usage.prompt_tokens == 3
    assert seen[0].headers["authorization"] == "Bearer sk-up"


@pytest.mark.parametrize(
    "status, error, relayed",
    [
        (400, InvalidRequest, True),
        (404, UpstreamNotFound, True),  # issue 28: a 404 with its message, not a 400 blaming the request
        (401, UpstreamError, False),  # a 401's message may quote the gateway's provider key: never relayed
    ],
)
async def test_client_faults_are_not_retried(status: int, error: type, relayed: bool) -> None:
    up, seen = provider(lambda n: httpx.Response(status, json={"error": {"message": "nope sk-up"}}))
    with pytest.raises(error) as err:
        await up.complete(CALL)
    assert len(seen) == 1
    assert ("nope" in err.value.message) is relayed
    assert "sk-up" not in err.value.message  # the provider key is redacted even where the message is relayed


async def test_timeouts_and_resets_are_gateway_errors() -> None:
    def timeout(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=request)

    def reset(request: httpx.Request) -> httpx.Response:
        raise httpx.RemoteProtocolError("peer closed connection", request=request)

    for handler, error in ((timeout, UpstreamTimeout), (reset, UpstreamError)):
        up = OpenAIProvider("m", "http://upstream/v1", None, transport=httpx.MockTransport(handler))
        with pytest.raises(error):
            await up.complete(CALL)


async def test_connect_errors_are_retried() -> None:
    attempts = []

    def refuse(request: httpx.Request) -> httpx.Response:
        attempts.append(1)
        if len(attempts) < 3:
            raise httpx.ConnectError("refused", request=request)
        return httpx.Response(200, json=OK)

    up = OpenAIProvider("m", "http://upstream/v1", None, transport=httpx.MockTransport(refuse))
    assert (await up.complete(CALL)).usage.completion_tokens == 1
    assert len(attempts) == 3


async def test_a_stream_dripping_past_the_total_timeout_ends_with_a_timeout() -> None:
    async def drip():
        for _ in range(50):
            await asyncio.sleep(0.05)
            yield b'data: {"choices": [{"delta": {"content": "x"}}]}\n\n'
        yield b"data: [DONE]\n\n"

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=drip())

    up = OpenAIProvider("m", "http://upstream/v1", None, timeout_s=0.5, transport=httpx.MockTransport(handler))
    stream = await up.open_stream(UpstreamCall(Endpoint.CHAT, CALL.body, True))
    events = []
    with pytest.raises(UpstreamTimeout):
        async for event in stream:
            events.append(event)
    assert 3 <= len(events) < 50  # each read came in time; the whole stream did not
