"""Tool calls for the fake upstream: asked for a tool (`tool_choice: "required"`, or one
function by name), it calls the first (or the named) tool with the last user text as
`{"q": ...}`, whole or streamed in OpenAI's chunk order (the call's id and name first, then
its arguments in two pieces)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import orjson

CALL_ID = "call_fake_1"


def wanted_tool(body: dict[str, Any]) -> str | None:
    """The tool the request makes the model call, if any."""
    tools = [t for t in body.get("tools") or () if isinstance(t, dict) and t.get("type") == "function"]
    choice = body.get("tool_choice")
    if not tools or choice in (None, "auto", "none"):
        return None
    if isinstance(choice, dict) and isinstance(choice.get("function"), dict):
        return str(choice["function"].get("name"))
    return str(tools[0]["function"]["name"])


def tool_message(name: str, question: str) -> dict[str, Any]:
    arguments = orjson.dumps({"q": question}).decode()
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": CALL_ID, "type": "function", "function": {"name": name, "arguments": arguments}}],
    }


def tool_completion(model: str, message: dict[str, Any], usage: dict[str, int]) -> dict[str, Any]:
    return {
        "id": "fake-tool",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
        "usage": usage,
    }


def tool_chunks(model: str, message: dict[str, Any], usage: dict[str, int] | None) -> list[dict[str, Any]]:
    call = message["tool_calls"][0]
    arguments = call["function"]["arguments"]
    half = len(arguments) // 2
    base = {"id": "fake-tool", "object": "chat.completion.chunk", "created": int(time.time()), "model": model}
    deltas = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "index": 0,
                    "id": call["id"],
                    "type": "function",
                    "function": {"name": call["function"]["name"], "arguments": ""},
                }
            ],
        },
        {"tool_calls": [{"index": 0, "function": {"arguments": arguments[:half]}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": arguments[half:]}}]},
    ]
    chunks = [{**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
    chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    if usage is not None:
        chunks.append({**base, "choices": [], "usage": usage})
    return chunks


async def sse(chunks: list[dict[str, Any]]) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield b"data: " + orjson.dumps(chunk) + b"\n\n"
    yield b"data: [DONE]\n\n"
