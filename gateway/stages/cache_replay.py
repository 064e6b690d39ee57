"""A cached answer, replayed in OpenAI's shapes: a whole completion, or server-sent events
(content chunks, the finish, the usage chunk when the client asked for it, `[DONE]`)."""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import AsyncIterator
from typing import Any

import orjson

from gateway.context import Endpoint
from policies.exact_cache import CachedAnswer

ZERO_COST = "0"
PIECE = re.compile(r"\S+\s*|\s+")
PIECES_PER_CHUNK = 8  # a replay need not trickle: a few words an event keeps clients' parsers honest


def _usage(answer: CachedAnswer, with_cost: bool) -> dict[str, Any]:
    usage: dict[str, Any] = {"prompt_tokens": answer.prompt_tokens, "completion_tokens": answer.completion_tokens,
                             "total_tokens": answer.prompt_tokens + answer.completion_tokens}
    if with_cost:
        usage["cost_usd"] = ZERO_COST
    return usage


def completion_body(endpoint: Endpoint, answer: CachedAnswer) -> dict[str, Any]:
    created = int(time.time())
    if endpoint is Endpoint.CHAT:
        return {"id": "chatcmpl-cg" + secrets.token_hex(10), "object": "chat.completion", "created": created,
                "model": answer.model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": answer.text},
                             "logprobs": None, "finish_reason": answer.finish_reason}],
                "usage": _usage(answer, with_cost=True)}
    return {"id": "cmpl-cg" + secrets.token_hex(10), "object": "text_completion", "created": created,
            "model": answer.model,
            "choices": [{"index": 0, "text": answer.text, "logprobs": None, "finish_reason": answer.finish_reason}],
            "usage": _usage(answer, with_cost=True)}


def _event(data: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(data) + b"\n\n"


async def replay_events(endpoint: Endpoint, answer: CachedAnswer, include_usage: bool) -> AsyncIterator[bytes]:
    chat = endpoint is Endpoint.CHAT
    base = {"id": ("chatcmpl-cg" if chat else "cmpl-cg") + secrets.token_hex(10),
            "object": "chat.completion.chunk" if chat else "text_completion", "created": int(time.time()),
            "model": answer.model}
    pieces = PIECE.findall(answer.text) or [""]
    for i in range(0, len(pieces), PIECES_PER_CHUNK):
        text = "".join(pieces[i:i + PIECES_PER_CHUNK])
        delta: dict[str, Any] = {"role": "assistant", "content": text} if i == 0 else {"content": text}
        choice = {"index": 0, "delta": delta, "finish_reason": None} if chat else \
            {"index": 0, "text": text, "finish_reason": None}
        yield _event({**base, "choices": [choice]})
    final = {"index": 0, "delta": {}, "finish_reason": answer.finish_reason} if chat else \
        {"index": 0, "text": "", "finish_reason": answer.finish_reason}
    yield _event({**base, "choices": [final]})
    if include_usage:
        yield _event({**base, "choices": [], "usage": _usage(answer, with_cost=True)})
    yield b": x-costgate-cost-usd=" + ZERO_COST.encode() + b"\n\n"
    yield b"data: [DONE]\n\n"
