"""Whole answers on aiohttp (gateway/providers/fast_post.py) give what the httpx path gives:
the same completion, the same gateway errors with the same codes and messages, against the
real fake upstream, a refused port and an upstream slower than the timeout."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest

from gateway.core.context import Endpoint
from gateway.core.errors import GatewayError
from gateway.providers.base import UpstreamCall
from gateway.providers.fast_post import FastPost, environment_proxies
from gateway.providers.openai_compatible import OpenAIProvider
from tests.support import FakeUpstream, free_port

pytestmark = pytest.mark.slow  # boots processes: not in the fast lane

HI = [{"role": "user", "content": "hi there"}]


def outcome_of(result: Any) -> tuple:
    if isinstance(result, GatewayError):
        return type(result).__name__, result.status, result.code, result.message
    return "answer", result.body["choices"], result.usage


async def both_paths(api_base: str, model: str, **options: Any) -> tuple[tuple, tuple]:
    """The same call through the aiohttp path and through httpx (forced by injecting httpx's
    own network transport)."""
    outcomes = []
    for transport in (None, httpx.AsyncHTTPTransport()):
        provider = OpenAIProvider("m", api_base, "sk-up", max_retries=0, transport=transport, **options)
        assert (provider._fast is None) is (transport is not None)
        try:
            outcomes.append(
                outcome_of(await provider.complete(UpstreamCall(Endpoint.CHAT, {"model": model, "messages": HI})))
            )
        except GatewayError as err:
            outcomes.append(outcome_of(err))
        finally:
            await provider.aclose()
    return outcomes[0], outcomes[1]


@pytest.mark.parametrize(
    "model, expected",
    [
        ("gpt-fake", "answer"),
        ("no-usage", "answer"),
        ("fail-503", "UpstreamError"),
        ("fail-429", "UpstreamRateLimited"),
        ("fail-401", "UpstreamError"),
        ("reject", "InvalidRequest"),
        ("html", "UnreadableAnswer"),
        ("garbage", "UnreadableAnswer"),
    ],
)
async def test_aiohttp_and_httpx_paths_agree(fake_upstream: FakeUpstream, model: str, expected: str) -> None:
    fast, slow = await both_paths(fake_upstream.url, model)
    assert fast[0] == expected
    assert fast == slow


async def test_a_refused_port_is_unreachable_on_both_paths() -> None:
    fast, slow = await both_paths(f"http://127.0.0.1:{free_port()}/v1", "gpt-fake", connect_timeout_s=2)
    assert fast[:3] == slow[:3] == ("UpstreamError", 502, "upstream_unreachable")


async def test_an_upstream_slower_than_the_timeout_times_out_on_both_paths(fake_upstream: FakeUpstream) -> None:
    fast, slow = await both_paths(fake_upstream.url, "slow", timeout_s=0.3)
    assert fast == slow
    assert fast[0] == "UpstreamTimeout" and fast[2] == "upstream_timeout"


async def test_fast_post_returns_status_headers_and_body(fake_upstream: FakeUpstream) -> None:
    post = FastPost(fake_upstream.url, {"authorization": "Bearer sk-up"}, timeout_s=10, connect_timeout_s=2)
    try:
        body = orjson.dumps({"model": "gpt-fake", "messages": HI})
        status, headers, raw = await post.post("/chat/completions", body)
        again = await post.post("/chat/completions", body)  # the pooled connection, reused
    finally:
        await post.aclose()
    assert status == 200 and again[0] == 200
    assert headers["content-type"].startswith("application/json")
    assert orjson.loads(raw)["choices"][0]["message"]["content"] == "echo: hi there"


@pytest.mark.parametrize(
    "env, expected",
    [
        ({}, False),
        ({"HTTPS_PROXY": "http://proxy.internal:3128"}, True),
        ({"http_proxy": "http://proxy.internal:3128"}, True),
        ({"ALL_PROXY": "http://proxy.internal:3128"}, True),
        ({"NO_PROXY": "localhost"}, False),
    ],
)
def test_a_proxy_in_the_environment_sends_whole_answers_through_httpx(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], expected: bool
) -> None:
    for name in (
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
        "NO_PROXY",
        "no_proxy",
    ):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert environment_proxies() is expected
    provider = OpenAIProvider("m", "http://upstream/v1", None)
    assert (provider._fast is None) is expected


# Streams take the same two paths (issue 14 item 6: the request's cost is on the first token's way).


async def stream_outcome(provider: OpenAIProvider, model: str) -> tuple:
    call = UpstreamCall(Endpoint.CHAT, {"model": model, "messages": HI, "stream": True}, True)
    try:
        stream = await provider.open_stream(call)
        return "events", [event.data["choices"] async for event in stream]
    except GatewayError as err:
        return outcome_of(err)


@pytest.mark.parametrize(
    "model, expected",
    [
        ("gpt-fake", "events"),
        ("truncate", "UpstreamError"),  # cut before [DONE]
        ("fail-503", "UpstreamError"),
        ("reject", "InvalidRequest"),
        ("html", "UnreadableAnswer"),  # not server-sent events
        ("json-stream", "UnreadableAnswer"),
    ],
)
async def test_streams_agree_on_both_paths(fake_upstream: FakeUpstream, model: str, expected: str) -> None:
    outcomes = []
    for transport in (None, httpx.AsyncHTTPTransport()):
        provider = OpenAIProvider("m", fake_upstream.url, "sk-up", max_retries=0, transport=transport)
        try:
            outcomes.append(await stream_outcome(provider, model))
        finally:
            await provider.aclose()
    assert outcomes[0][0] == expected
    assert outcomes[0] == outcomes[1]


async def test_a_stream_slower_than_the_timeout_times_out_on_both_paths(fake_upstream: FakeUpstream) -> None:
    for transport in (None, httpx.AsyncHTTPTransport()):
        provider = OpenAIProvider("m", fake_upstream.url, "sk-up", max_retries=0, timeout_s=0.3, transport=transport)
        try:
            assert (await stream_outcome(provider, "slow"))[:3] == ("UpstreamTimeout", 504, "upstream_timeout")
        finally:
            await provider.aclose()


async def requests_of(reader: asyncio.StreamReader) -> AsyncIterator[list[bytes]]:
    """Each request on a keep-alive connection, as its header lines (lower case), its body read."""
    while head := await reader.readuntil(b"\r\n\r\n"):
        lines = head.lower().split(b"\r\n")
        await reader.readexactly(next(int(line.split(b":")[1]) for line in lines if line.startswith(b"content-length")))
        yield lines


class CountingUpstream:
    """An upstream that streams every request the same SSE answer (chunked, keep-alive) and
    counts the connections it accepts."""

    EVENTS = b'data: {"choices": [{"index": 0, "delta": {"content": "hi"}}]}\n\ndata: [DONE]\n\n'

    def __init__(self) -> None:
        self.connections = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            async for _ in requests_of(reader):
                chunk = f"{len(self.EVENTS):x}\r\n".encode() + self.EVENTS + b"\r\n0\r\n\r\n"
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
                )
                writer.write(chunk)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()


@pytest.mark.parametrize("httpx_path", [False, True])
async def test_streams_reuse_the_pooled_connection(httpx_path: bool) -> None:
    """Read to its end after [DONE], a stream's connection goes back to the pool: the next stream
    pays no connect (and no anyio happy-eyeballs task group) before its first token."""
    upstream = CountingUpstream()
    server = await asyncio.start_server(upstream.serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    transport = httpx.AsyncHTTPTransport() if httpx_path else None
    provider = OpenAIProvider("m", f"http://127.0.0.1:{port}/v1", "sk-up", max_retries=0, transport=transport)
    try:
        for _ in range(3):
            assert (await stream_outcome(provider, "any")) == ("events", [[{"index": 0, "delta": {"content": "hi"}}]])
    finally:
        await provider.aclose()
        server.close()
    assert upstream.connections == 1


class CookieSettingUpstream:
    """An upstream (a CDN in front of a provider) that sets a cookie on every answer and records
    the Cookie header of each request."""

    ANSWER = orjson.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}]})

    def __init__(self) -> None:
        self.cookies: list[bytes | None] = []

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async for lines in requests_of(reader):
                self.cookies.append(next((line for line in lines if line.startswith(b"cookie:")), None))
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    + b"set-cookie: __cf_bm=team-a-session; Path=/\r\n"
                    + f"content-length: {len(self.ANSWER)}\r\n\r\n".encode()
                    + self.ANSWER
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()


@pytest.mark.parametrize("httpx_path", [False, True])
async def test_a_cookie_the_upstream_set_never_rides_on_the_next_call(httpx_path: bool) -> None:
    """One client carries every team's calls: what the provider's CDN set on one answer must not
    go up with the next (another team's) request."""
    upstream = CookieSettingUpstream()
    server = await asyncio.start_server(upstream.serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    transport = httpx.AsyncHTTPTransport() if httpx_path else None
    provider = OpenAIProvider("m", f"http://127.0.0.1:{port}/v1", "sk-up", max_retries=0, transport=transport)
    try:
        for _ in range(3):
            await provider.complete(UpstreamCall(Endpoint.CHAT, {"model": "m", "messages": HI}))
    finally:
        await provider.aclose()
        server.close()
    assert upstream.cookies == [None, None, None]
