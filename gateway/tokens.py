"""Token counts with tiktoken, from the encoding files litellm ships (never downloaded)."""

from __future__ import annotations

import importlib.util
import os
from functools import cache
from pathlib import Path
from typing import Any

import tiktoken  # noqa: E402  (TIKTOKEN_CACHE_DIR must be set before the first encoding load)

# Per-message framing OpenAI adds around each chat message.
TOKENS_PER_MESSAGE = 3
TOKENS_PER_REPLY = 3


def _point_tiktoken_at_litellm() -> None:
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        return
    spec = importlib.util.find_spec("litellm")
    if spec and spec.submodule_search_locations:
        root = Path(next(iter(spec.submodule_search_locations)))
        os.environ["TIKTOKEN_CACHE_DIR"] = str(root / "litellm_core_utils" / "tokenizers")


@cache
def encoding_for(model: str) -> tiktoken.Encoding:
    _point_tiktoken_at_litellm()
    name = "o200k_base" if model.startswith(("gpt-4o", "o1", "o3", "o4", "gpt-4.1", "gpt-5")) else "cl100k_base"
    return tiktoken.get_encoding(name)


def count_text(text: str, model: str = "") -> int:
    return len(encoding_for(model).encode(text, disallowed_special=()))


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: count the text ones
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def count_messages(messages: list[dict[str, Any]], model: str = "") -> int:
    enc = encoding_for(model)
    total = TOKENS_PER_REPLY
    for message in messages:
        total += TOKENS_PER_MESSAGE
        total += len(enc.encode(_content_text(message.get("content")), disallowed_special=()))
        if message.get("name"):
            total += 1
        for call in message.get("tool_calls") or ():
            fn = call.get("function") or {}
            total += len(enc.encode(str(fn.get("name", "")) + str(fn.get("arguments", "")),
                                    disallowed_special=()))
    return total


def count_prompt(body: dict[str, Any], model: str = "") -> int:
    """Prompt tokens of a chat, completion or embedding request body."""
    if "messages" in body:
        return count_messages(body["messages"], model)
    value = body.get("prompt", body.get("input", ""))
    items = value if isinstance(value, list) else [value]
    enc = encoding_for(model)
    total = 0
    for item in items:
        if isinstance(item, str):
            total += len(enc.encode(item, disallowed_special=()))
        elif isinstance(item, list):  # already tokens
            total += len(item)
    return total
