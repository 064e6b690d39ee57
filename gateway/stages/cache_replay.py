"""A cached answer in OpenAI's whole-completion shape (gateway/core/sse.py streams it)."""

from __future__ import annotations

import secrets
import time
from typing import Any

from gateway.core.context import Endpoint
from policies.exact_cache import CachedAnswer

ZERO_COST = "0"
WORDS_PER_CHUNK = 8  # a replay need not trickle: a few words an event keeps clients' parsers honest


def completion_body(endpoint: Endpoint, answer: CachedAnswer) -> dict[str, Any]:
    usage = {
        "prompt_tokens": answer.prompt_tokens,
        "completion_tokens": answer.completion_tokens,
        "total_tokens": answer.prompt_tokens + answer.completion_tokens,
        "cost_usd": ZERO_COST,
    }
    created = int(time.time())
    if endpoint is Endpoint.CHAT:
        return {
            "id": "chatcmpl-cg" + secrets.token_hex(10),
            "object": "chat.completion",
            "created": created,
            "model": answer.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": answer.text},
                    "logprobs": None,
                    "finish_reason": answer.finish_reason,
                }
            ],
            "usage": usage,
        }
    return {
        "id": "cmpl-cg" + secrets.token_hex(10),
        "object": "text_completion",
        "created": created,
        "model": answer.model,
        "choices": [{"index": 0, "text": answer.text, "logprobs": None, "finish_reason": answer.finish_reason}],
        "usage": usage,
    }
