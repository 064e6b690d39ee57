"""Server-sent events in OpenAI's streaming shapes: the one module that writes them.

Every stream the gateway sends ends the same way (`stream_tail`): the usage chunk when the
client asked for one (with the request's cost as `usage.cost_usd`), a comment carrying the
cost, then `[DONE]`. `[DONE]` is a `StreamEnd`: the pipeline recognises it by type, holds it
back until the request is settled (ledger row journaled, budget released), then lets it go,
so a client that saw `[DONE]` can rely on the spend being recorded.

`replay` streams an answer the gateway already holds whole (a cascade tier it scored first, a
cached answer) as the chunks a streaming upstream would have sent.

The Responses and Messages APIs (gateway/apis) send typed events instead: `typed_event`
writes one with the `event:` line those APIs carry (Anthropic's SDK skips an event without
one); its name is the payload's `type`.
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import orjson

from gateway.core.context import Endpoint
from policies.pricing import Usage

SSE_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}
PIECE = re.compile(r"\S+\s*|\s+")


class StreamEnd(bytes):
    """The last event of a stream; the pipeline sends it only after settling the request."""


SSE_DONE = StreamEnd(b"data: [DONE]\n\n")


def event(data: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(data) + b"\n\n"


def typed_event(data: dict[str, Any]) -> bytes:
    return b"event: " + str(data["type"]).encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


def usage_chunk(last: dict[str, Any], usage: Usage, cost: str, reported: Any = None) -> dict[str, Any]:
    """OpenAI's final usage chunk, with the request's cost added as `usage.cost_usd`. The token
    details the upstream `reported` (audio, predictions…) are kept; cached and reasoning tokens
    are those charged."""
    prompt_details, completion_details = (
        _details(reported, "prompt_tokens_details"),
        _details(reported, "completion_tokens_details"),
    )
    return {
        "id": last.get("id", ""),
        "object": last.get("object", "chat.completion.chunk"),
        "created": last.get("created", int(time.time())),
        "model": last.get("model", ""),
        "choices": [],
        "usage": {
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "total_tokens": usage.total_tokens,
            "prompt_tokens_details": {**prompt_details, "cached_tokens": usage.cached_tokens},
            "completion_tokens_details": {**completion_details, "reasoning_tokens": usage.reasoning_tokens},
            "cost_usd": cost,
        },
    }


def _details(reported: Any, name: str) -> dict[str, Any]:
    found = reported.get(name) if isinstance(reported, dict) else None
    return found if isinstance(found, dict) else {}


def stream_tail(
    last: dict[str, Any], usage: Usage, cost: str, include_usage: bool, reported: Any = None
) -> Iterator[bytes]:
    """How every stream ends: the usage chunk (if asked: `reported` is the upstream's usage
    object, whose other details it keeps), the cost comment, [DONE]."""
    if include_usage:
        yield event(usage_chunk(last, usage, cost, reported))
    yield b": x-costgate-cost-usd=" + cost.encode() + b"\n\n"
    yield SSE_DONE


def _pieces(text: str, words_per_chunk: int | None) -> list[str]:
    if words_per_chunk is None:
        return [text]
    pieces = PIECE.findall(text) or [""]
    return ["".join(pieces[i : i + words_per_chunk]) for i in range(0, len(pieces), words_per_chunk)]


def chunks(endpoint: Endpoint, body: dict[str, Any], words_per_chunk: int | None = None) -> list[dict[str, Any]]:
    """The chunk events a streaming upstream would have sent for `body`: each choice's content
    (in pieces of `words_per_chunk` words, or whole), then its finish."""
    chat = endpoint is Endpoint.CHAT
    base = {
        "id": body.get("id", ""),
        "object": "chat.completion.chunk" if chat else "text_completion",
        "created": body.get("created", int(time.time())),
        "model": body.get("model", ""),
    }
    if body.get("system_fingerprint"):
        base["system_fingerprint"] = body["system_fingerprint"]
    events = []
    for position, choice in enumerate(body.get("choices") or ()):
        index = choice.get("index", position)
        message = choice.get("message") or {}
        text = message.get("content") if chat else choice.get("text", "")
        for n, piece in enumerate(_pieces(text, words_per_chunk) if isinstance(text, str) else [text]):
            if chat:
                delta: dict[str, Any] = {"role": "assistant", "content": piece} if n == 0 else {"content": piece}
                if n == 0 and message.get("tool_calls"):
                    delta["tool_calls"] = [{**call, "index": i} for i, call in enumerate(message["tool_calls"])]
                events.append({**base, "choices": [{"index": index, "delta": delta, "finish_reason": None}]})
            else:
                events.append({**base, "choices": [{"index": index, "text": piece, "finish_reason": None}]})
        finish = {"index": index, "delta": {}} if chat else {"index": index, "text": ""}
        events.append({**base, "choices": [{**finish, "finish_reason": choice.get("finish_reason")}]})
    return events


def chunk_text(endpoint: Endpoint, data: dict[str, Any]) -> str:
    """The text one chunk event carries (what a relay collects to count and cache)."""
    parts = []
    for choice in data.get("choices") or ():
        if not isinstance(choice, dict):
            continue
        source = choice.get("delta") if endpoint is Endpoint.CHAT else choice
        text = (source or {}).get("content" if endpoint is Endpoint.CHAT else "text")
        if isinstance(text, str):
            parts.append(text)
    return "".join(parts)


async def replay(
    endpoint: Endpoint,
    body: dict[str, Any],
    usage: Usage,
    cost: str,
    include_usage: bool,
    words_per_chunk: int | None = None,
) -> AsyncIterator[bytes]:
    """A whole answer as SSE, then the tail every stream ends with."""
    events = chunks(endpoint, body, words_per_chunk)
    for data in events:
        yield event(data)
    for tail in stream_tail(events[-1] if events else body, usage, cost, include_usage):
        yield tail
