"""The fake OpenAI upstream's billing models (`bill-*`, issue 16's budget tests), chosen by the
model name in `fake_openai`:

    bill-openai         bills the way OpenAI does: usage counts the whole request body as prompt
                        tokens (as received; images by OpenAI's tile rule instead of their
                        bytes), and generates max_tokens tokens (else DEFAULT_OUTPUT) for each of
                        n x best_of completions of every prompt of a list
    bill-endless        ignores max_tokens: a stream goes on until the client leaves (then counts
                        `closed:bill-endless` in /_stats); a whole answer is ENDLESS_FACTOR times
                        max_tokens long
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import orjson
from starlette.responses import Response, StreamingResponse

from gateway.core.images import data_url_size, rule_for
from gateway.core.tokens import count_text

DEFAULT_OUTPUT = 100
ENDLESS_FACTOR = 20
TOKEN = " x"  # one token in every tiktoken encoding


def body_tokens(raw: bytes, body: dict[str, Any], model: str) -> int:
    """The request's bytes as prompt tokens, but each image at its tile price."""
    images, rule = 0, rule_for(model)
    for message in body.get("messages") or ():
        content = message.get("content") if isinstance(message, dict) else None
        for i, part in enumerate(content if isinstance(content, list) else ()):
            if isinstance(part, dict) and part.get("type") == "image_url":
                image = part.get("image_url") or {}
                url = image.get("url") if isinstance(image, dict) else image
                images += rule.tokens(
                    data_url_size(url) if isinstance(url, str) else None,
                    image.get("detail") if isinstance(image, dict) else None,
                )
                content[i] = {"type": "image_url"}
    text = raw.decode() if not images else orjson.dumps(body).decode()
    return count_text(text, model) + images


def prompts(body: dict[str, Any]) -> int:
    prompt = body.get("prompt")
    return len(prompt) if isinstance(prompt, list) and prompt and not isinstance(prompt[0], int) else 1


def positive(value: Any) -> int:
    return value if isinstance(value, int) and value > 0 else 1


def billing_answer(calls: Counter[str], raw: bytes, body: dict[str, Any], model: str, chat: bool) -> Response:
    asked = body.get("max_completion_tokens") or body.get("max_tokens")
    each = positive(asked) if asked else DEFAULT_OUTPUT
    if model == "bill-endless":
        if body.get("stream"):
            return StreamingResponse(_endless(calls, model, chat), media_type="text/event-stream")
        each *= ENDLESS_FACTOR
    count = prompts(body) * positive(body.get("n")) * positive(body.get("best_of"))
    returned = prompts(body) * positive(body.get("n"))  # best_of's extra candidates are billed, not sent
    usage = {"prompt_tokens": body_tokens(raw, body, model), "completion_tokens": count * each}
    usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    if body.get("stream"):
        return StreamingResponse(_stream(model, chat, returned, each, usage), media_type="text/event-stream")
    text = TOKEN * each
    choices = [
        {"index": i, "message": {"role": "assistant", "content": text}, "finish_reason": "length"}
        if chat
        else {"index": i, "text": text, "finish_reason": "length"}
        for i in range(returned)
    ]
    data = {
        "id": "fake-bill",
        "object": "chat.completion" if chat else "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": choices,
        "usage": usage,
    }
    return Response(orjson.dumps(data), media_type="application/json")


def _chunk(model: str, chat: bool, index: int, text: str | None, finish: str | None = None) -> bytes:
    choice = (
        {"index": index, "delta": {} if text is None else {"content": text}, "finish_reason": finish}
        if chat
        else {"index": index, "text": text or "", "finish_reason": finish}
    )
    data = {
        "id": "fake-bill",
        "object": "chat.completion.chunk" if chat else "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
    }
    return b"data: " + orjson.dumps(data) + b"\n\n"


async def _stream(model: str, chat: bool, returned: int, each: int, usage: dict[str, int]) -> AsyncIterator[bytes]:
    for index in range(returned):
        for _ in range(each):
            yield _chunk(model, chat, index, TOKEN)
        yield _chunk(model, chat, index, None, "length")
    yield (
        b"data: "
        + orjson.dumps(
            {
                "id": "fake-bill",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": model,
                "choices": [],
                "usage": usage,
            }
        )
        + b"\n\n"
    )
    yield b"data: [DONE]\n\n"


async def _endless(calls: Counter[str], model: str, chat: bool) -> AsyncIterator[bytes]:
    try:
        while True:
            yield _chunk(model, chat, 0, TOKEN)
            await asyncio.sleep(0)  # let a disconnect through
    finally:
        calls[f"closed:{model}"] += 1
