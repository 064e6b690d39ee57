"""Replay a whole answer as server-sent events, for a streamed request whose answer the
gateway already holds (a cascade tier it scored before letting the client see it)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import orjson

from gateway.context import Endpoint, RequestContext
from gateway.pipeline import SSE_DONE
from gateway.upstream import usage_chunk
from policies.pricing import format_usd


def _event(data: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(data) + b"\n\n"


def chunks(endpoint: Endpoint, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The chunk events a streaming upstream would have sent for `body` (content, then finish)."""
    chat = endpoint is Endpoint.CHAT
    base = {"id": body.get("id", ""), "object": "chat.completion.chunk" if chat else "text_completion",
            "created": body.get("created", int(time.time())), "model": body.get("model", "")}
    if body.get("system_fingerprint"):
        base["system_fingerprint"] = body["system_fingerprint"]
    events = []
    for position, choice in enumerate(body.get("choices") or ()):
        index = choice.get("index", position)
        if chat:
            message = choice.get("message") or {}
            delta: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
            if message.get("tool_calls"):
                delta["tool_calls"] = [{**call, "index": i} for i, call in enumerate(message["tool_calls"])]
            events.append({**base, "choices": [{"index": index, "delta": delta, "finish_reason": None}]})
            events.append({**base, "choices": [{"index": index, "delta": {},
                                                 "finish_reason": choice.get("finish_reason")}]})
        else:
            events.append({**base, "choices": [{"index": index, "text": choice.get("text", ""),
                                                 "finish_reason": choice.get("finish_reason")}]})
    return events


async def replay(ctx: RequestContext, body: dict[str, Any]) -> AsyncIterator[bytes]:
    """The answer as SSE, then (if asked) the usage chunk with the request's summed cost, the
    cost comment and [DONE] — the same tail a relayed stream ends with."""
    options = ctx.body.get("stream_options") or {}
    ctx.wants_usage_chunk = bool(options.get("include_usage"))
    events = chunks(ctx.endpoint, body)
    for data in events:
        if ctx.first_token_at is None:
            ctx.first_token_at = time.perf_counter()
        for choice in data["choices"]:
            text = (choice.get("delta") or {}).get("content") if "delta" in choice else choice.get("text")
            if text:
                ctx.completion_text.append(text)
        yield _event(data)
    cost = format_usd(ctx.cost)
    if ctx.wants_usage_chunk:
        last = events[-1] if events else {}
        yield _event(usage_chunk(last, ctx.usage, cost))
    yield b": x-costgate-cost-usd=" + cost.encode() + b"\n\n"
    yield SSE_DONE
