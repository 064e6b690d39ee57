"""The production upstream path (aiohttp, gateway/providers/fast_post.py) in process: a small
OpenAI-speaking fake on aiohttp.web in the test's own loop, and `OpenAIProvider` with no
transport injected, so `complete` and `open_stream` take the aiohttp branch as in production
(test_fast_post.py compares both clients against the subprocess fake, in the slow lane)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from gateway.core.context import Endpoint
from gateway.core.errors import GatewayError
from gateway.providers.base import UpstreamCall
from gateway.providers.openai_compatible import OpenAIProvider

HI = [{"role": "user", "content": "hi there"}]
USAGE = {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}


def chunk(content: str | None, finish: str | None = None) -> bytes:
    delta = {} if content is None else {"content": content}
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    body = {"id": "c1", "object": "chat.completion.chunk", "model": "m", "choices": [choice]}
    return b"data: " + json.dumps(body).encode() + b"\n\n"


async def chat(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    if request.headers.get("authorization") != "Bearer sk-up":
        return web.json_response({"error": {"message": "bad key"}}, status=401)
    if body["model"] == "fail-429":
        return web.json_response({"error": {"message": "slow down", "type": "rate_limit"}}, status=429)
    if not body.get("stream"):
        message = {"role": "assistant", "content": "hello"}
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        return web.json_response({"id": "c1", "object": "chat.completion", "choices": [choice], "usage": USAGE})
    response = web.StreamResponse(headers={"content-type": "text/event-stream"})
    await response.prepare(request)
    for part in (chunk("hel"), chunk("lo"), chunk(None, "stop"), b"data: [DONE]\n\n"):
        await response.write(part)
    await response.write_eof()
    return response


@pytest.fixture
async def upstream(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[str]:
    """The fake's base URL, with no proxy in the environment (one would send calls through httpx)."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield f"http://127.0.0.1:{port}/v1"
    await runner.cleanup()


async def test_a_whole_answer_takes_the_aiohttp_path(upstream: str) -> None:
    provider = OpenAIProvider("m", upstream, "sk-up", max_retries=0)
    assert provider._fast is not None  # the production branch, not httpx
    try:
        result = await provider.complete(UpstreamCall(Endpoint.CHAT, {"model": "gpt-fake", "messages": HI}))
        assert result.body["choices"][0]["message"]["content"] == "hello"
        assert result.usage is not None and result.usage.prompt_tokens == 7
        with pytest.raises(GatewayError) as err:
            await provider.complete(UpstreamCall(Endpoint.CHAT, {"model": "fail-429", "messages": HI}))
        assert (type(err.value).__name__, err.value.status) == ("UpstreamRateLimited", 429)
    finally:
        await provider.aclose()


async def test_a_stream_takes_the_aiohttp_path(upstream: str) -> None:
    provider = OpenAIProvider("m", upstream, "sk-up", max_retries=0)
    assert provider._fast is not None
    try:
        call = UpstreamCall(Endpoint.CHAT, {"model": "gpt-fake", "messages": HI, "stream": True}, True)
        stream = await provider.open_stream(call)
        texts = [event.data["choices"][0]["delta"].get("content") async for event in stream]
        assert texts == ["hel", "lo", None]
    finally:
        await provider.aclose()
