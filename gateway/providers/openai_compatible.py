"""Any OpenAI-compatible upstream, through one pooled client per deployment (aiohttp when the
provider owns the network, gateway/providers/fast_post.py; httpx with an injected transport)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from http.cookiejar import CookieJar, DefaultCookiePolicy
from typing import Any

import httpx
import orjson

from gateway.core.context import Endpoint
from gateway.core.errors import (
    GatewayError,
    InvalidRequest,
    UnreadableAnswer,
    UpstreamError,
    UpstreamNotFound,
    UpstreamTimeout,
)
from gateway.providers import fast_post
from gateway.providers.base import Completion, StreamEvent, UpstreamCall, redact, usage_from
from gateway.providers.fast_post import FastPost, environment_proxies
from gateway.providers.retry import RETRYABLE_STATUS, Retryable, parse_retry_after, with_retries

PATHS = {
    Endpoint.CHAT: "/chat/completions",
    Endpoint.COMPLETIONS: "/completions",
    Endpoint.EMBEDDINGS: "/embeddings",
    Endpoint.RESPONSES: "/responses",
    Endpoint.MESSAGES: "/messages",
}
# A Messages upstream (Anthropic's API) reads the key from x-api-key and wants a version; every
# body costgate sends is valid in 2023-06-01 (gateway/apis/anthropic/headers.py).
ANTHROPIC_VERSION = "2023-06-01"
# Where a stream without [DONE] ends: the Responses API's terminal events, Anthropic's message_stop.
RESPONSES_LAST = frozenset({"response.completed", "response.incomplete", "response.failed", "error"})


def last_event(endpoint: Endpoint) -> Callable[[dict[str, Any]], bool] | None:
    """How a stream of `endpoint` ends when it sends no [DONE]; None for OpenAI's [DONE]."""
    if endpoint is Endpoint.RESPONSES:
        return lambda data: data.get("type") in RESPONSES_LAST
    if endpoint is Endpoint.MESSAGES:
        return lambda data: data.get("type") == "message_stop"
    return None


def not_a_stream() -> UpstreamError:
    return UnreadableAnswer("upstream answered a stream request without server-sent events")


# How long the rest of a stream's body may take once its last event is read (see OpenAIStream._drain).
DRAIN_S = 1.0

# Upstream statuses that mean the request itself is wrong: the client gets them as they came.
CLIENT_FAULT = frozenset({400, 409, 413, 422})


@dataclass(frozen=True, slots=True)
class ProviderError:
    """What a provider said in its error body: OpenAI's `{"error": {message, type, code, param}}`,
    Anthropic's `{"type": "error", "error": {type, message}}`, or vLLM's older flat object."""

    message: str | None = None
    type: str | None = None
    code: str | None = None
    param: str | None = None

    @classmethod
    def parse(cls, raw: bytes) -> ProviderError:
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return cls()
        found = body.get("error") if isinstance(body, dict) else None
        if not isinstance(found, dict):
            found = body if isinstance(body, dict) and "message" in body else {}
        text = {k: v for k in ("message", "type", "code", "param") if isinstance(v := found.get(k), str) and v}
        return cls(**text)


def _upstream_message(raw: bytes) -> str:
    return ProviderError.parse(raw).message or "no error message"


def provider_refusal(status: int, raw: bytes) -> GatewayError:
    """A provider's 4xx as the client gets it: the provider's status, message, type, code and
    param, unprefixed, so an SDK reads `context_length_exceeded` on `messages` as from the
    provider itself. A 404 (the upstream lacks the model or path) is the deployment's matter:
    an `UpstreamError`, so a fallback may still answer."""
    found = ProviderError.parse(raw)
    message = found.message or f"the upstream refused the request with status {status}"
    if status == 404:
        return UpstreamNotFound(message, code=found.code, param=found.param, error_type=found.type)
    err = InvalidRequest(
        message, code=found.code or "upstream_invalid_request", param=found.param, error_type=found.type
    )
    err.status = status
    return err


def check_status(status: int, headers: Mapping[str, str], raw: bytes) -> None:
    """Raise the gateway error that an upstream's non-2xx answer stands for."""
    if status < 300:
        return
    if status in RETRYABLE_STATUS:
        raise Retryable(
            f"upstream answered {status}", status=status, retry_after=parse_retry_after(headers.get("retry-after"))
        )
    if status in CLIENT_FAULT or status == 404:
        raise provider_refusal(status, raw)
    # 401/403 mean the gateway's own provider key is wrong: the client cannot fix that,
    # and the upstream's message may quote the key, so it is not relayed.
    raise UpstreamError(f"upstream answered {status}")


def unreachable(model: str) -> Retryable:
    """A connect failure, in words that name the model, not the host, port or client library."""
    return Retryable(f"cannot connect to the upstream of model {model!r}", code="upstream_unreachable")


def connection_failed(model: str, err: httpx.TransportError) -> UpstreamError:
    """A connection that broke after it was made: what happened, without the library's names."""
    what = "sent a malformed answer" if isinstance(err, httpx.RemoteProtocolError) else "dropped the connection"
    return UpstreamError(f"the upstream of model {model!r} {what}", code="upstream_connection_failed")


def parse_json_object(raw: bytes) -> dict[str, Any]:
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise UnreadableAnswer("upstream answered with a body that is not JSON") from None
    if not isinstance(body, dict):
        raise UnreadableAnswer("upstream answered with JSON that is not an object")
    return body


class OpenAIStream:
    """Server-sent events from an open response's lines (httpx's or aiohttp's, their faults as
    httpx's exceptions); `close` ends the response when the stream is done or abandoned."""

    def __init__(
        self,
        lines: AsyncIterator[str],
        close: Callable[[], Awaitable[None]],
        redact: Callable[[bytes], bytes] = bytes,
        deadline_s: float | None = None,
        last: Callable[[dict[str, Any]], bool] | None = None,
    ) -> None:
        self._lines = lines
        self._close = close
        self._redact = redact
        self._last = last  # the event after which the stream is over (an API without [DONE])
        # httpx times each read; an upstream dripping lines just in time must still end.
        self._deadline = None if deadline_s is None else time.monotonic() + deadline_s

    async def __aiter__(self) -> AsyncIterator[StreamEvent]:
        lines = self._lines
        try:
            async for line in lines:
                if self._deadline is not None and time.monotonic() > self._deadline:
                    raise UpstreamTimeout("upstream stream outlasted the model's timeout_s")
                if not line.startswith("data:"):
                    continue  # comments, event names, blank separators
                payload = line[5:].strip()
                if payload == "[DONE]":
                    await self._drain(lines)
                    return
                raw = self._redact(payload.encode())
                try:
                    data = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    raise UpstreamError(
                        "upstream stream carried an event that is not JSON", code="bad_upstream_stream"
                    ) from None
                if not isinstance(data, dict):
                    raise UpstreamError(
                        "upstream stream carried an event that is not an object", code="bad_upstream_stream"
                    )
                if "error" in data and "choices" not in data:
                    raise UpstreamError(f"upstream stream failed: {_upstream_message(raw)}")
                yield StreamEvent(raw, data)
                if self._last is not None and self._last(data):
                    await self._drain(lines)
                    return
            raise UpstreamError("upstream stream ended without [DONE]", code="truncated_stream")
        except httpx.TimeoutException:
            raise UpstreamTimeout("upstream stream timed out") from None
        except httpx.TransportError as err:
            what = "sent a malformed stream" if isinstance(err, httpx.RemoteProtocolError) else "broke off"
            raise UpstreamError(f"the upstream's stream {what}", code="truncated_stream") from None
        finally:
            await self._close()

    async def _drain(self, lines: AsyncIterator[str]) -> None:
        """Read the body to its end (the chunked encoding's last chunk, which comes with the
        last event or right after it), so that the connection goes back to the pool. Closed
        unread, it is dropped, and the next stream pays a new connection on its way to the
        first token: a TCP connect and anyio's happy-eyeballs task group, whose cancellation
        alone took ~1 ms of CPU a stream on the bench machine (issue 14 item 6)."""
        try:
            async with asyncio.timeout(DRAIN_S):
                async for _ in lines:
                    pass
        except (TimeoutError, httpx.HTTPError):
            pass  # the answer is whole: a body that does not end only costs its connection

    async def aclose(self) -> None:
        await self._close()


class OpenAIProvider:
    """`provider: openai` — any host that speaks OpenAI's HTTP API."""

    def __init__(
        self,
        name: str,
        api_base: str,
        api_key: str | None,
        *,
        timeout_s: float = 600.0,
        connect_timeout_s: float = 5.0,
        max_retries: int = 2,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.name = name
        self.max_retries = max_retries
        self.timeout_s = timeout_s
        self._secret = api_key.encode() if api_key else b""
        headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
        self._anthropic = {"x-api-key": api_key or "", "anthropic-version": ANTHROPIC_VERSION}
        self._client = httpx.AsyncClient(
            base_url=api_base.rstrip("/"),
            headers=headers,
            transport=transport,
            timeout=httpx.Timeout(timeout_s, connect=connect_timeout_s),
            limits=httpx.Limits(max_connections=1000, max_keepalive_connections=200),
            cookies=CookieJar(DefaultCookiePolicy(allowed_domains=[])),  # keeps none (fast_post.py says why)
        )
        # Whole answers go through aiohttp when this provider owns the network (see fast_post).
        self._fast = (
            None
            if transport is not None or environment_proxies()
            else FastPost(api_base, headers, timeout_s=timeout_s, connect_timeout_s=connect_timeout_s)
        )

    async def complete(self, call: UpstreamCall) -> Completion:
        return await with_retries(lambda: self._complete_once(call), self.max_retries)

    async def _complete_once(self, call: UpstreamCall) -> Completion:
        try:
            # httpx times each read; an upstream dripping bytes just in time must still end.
            async with asyncio.timeout(self.timeout_s):
                if self._fast is not None:
                    status, headers, raw = await self._fast.post(
                        PATHS[call.endpoint], orjson.dumps(call.body), self._headers(call)
                    )
                else:
                    response = await self._client.post(
                        PATHS[call.endpoint],
                        content=orjson.dumps(call.body),
                        headers={"content-type": "application/json", **self._headers(call)},
                    )
                    status, headers, raw = response.status_code, response.headers, response.content
        except httpx.ConnectError:
            raise unreachable(self.name) from None
        except (httpx.TimeoutException, TimeoutError):
            raise UpstreamTimeout("upstream timed out") from None
        except httpx.TransportError as err:
            raise connection_failed(self.name, err) from None
        raw = self.redact(raw)
        check_status(status, headers, raw)
        body = parse_json_object(raw)
        return Completion(body, raw, usage_from(body.get("usage")))

    async def open_stream(self, call: UpstreamCall) -> OpenAIStream:
        return await with_retries(lambda: self._open_stream_once(call), self.max_retries)

    async def _open_stream_once(self, call: UpstreamCall) -> OpenAIStream:
        if self._fast is not None:
            return await self._open_fast_stream(call)
        request = self._client.build_request(
            "POST",
            PATHS[call.endpoint],
            content=orjson.dumps(call.body),
            headers={"content-type": "application/json", **self._headers(call)},
        )
        try:
            response = await self._client.send(request, stream=True)
        except httpx.ConnectError:
            raise unreachable(self.name) from None
        except httpx.TimeoutException:
            raise UpstreamTimeout("upstream timed out") from None
        except httpx.TransportError as err:
            raise connection_failed(self.name, err) from None
        if response.status_code >= 300:
            raw = self.redact(await response.aread())
            await response.aclose()
            check_status(response.status_code, response.headers, raw)
        if "text/event-stream" not in response.headers.get("content-type", ""):
            await response.aclose()
            raise not_a_stream()
        return OpenAIStream(
            response.aiter_lines(), response.aclose, self.redact, self.timeout_s, last_event(call.endpoint)
        )

    async def _open_fast_stream(self, call: UpstreamCall) -> OpenAIStream:
        """`_open_stream_once` on aiohttp (gateway/providers/fast_post.py): the same errors."""
        assert self._fast is not None
        try:
            response = await self._fast.open(PATHS[call.endpoint], orjson.dumps(call.body), self._headers(call))
            if response.status >= 300:
                try:
                    raw = self.redact(await fast_post.read(response))
                finally:
                    response.close()
                check_status(response.status, response.headers, raw)
        except httpx.ConnectError:
            raise unreachable(self.name) from None
        except httpx.TimeoutException:
            raise UpstreamTimeout("upstream timed out") from None
        except httpx.TransportError as err:
            raise connection_failed(self.name, err) from None
        if "text/event-stream" not in response.headers.get("content-type", ""):
            response.close()
            raise not_a_stream()

        async def close() -> None:
            await fast_post.finish(response)

        return OpenAIStream(fast_post.lines(response), close, self.redact, self.timeout_s, last_event(call.endpoint))

    def _headers(self, call: UpstreamCall) -> dict[str, str]:
        own = self._anthropic if call.endpoint is Endpoint.MESSAGES else {}
        return {**own, **dict(call.headers)} if call.headers else own

    def redact(self, raw: bytes) -> bytes:
        return redact(raw, self._secret)

    async def aclose(self) -> None:
        await self._client.aclose()
        if self._fast is not None:
            await self._fast.aclose()
