"""How the providers stream a whole answer, event by event, for the three APIs the agent fake
speaks (`fake_agents`): a Message as Anthropic's typed events (`message_events`), a Response as
OpenAI's numbered `response.*` events (`response_events`), a chat completion as Chat
Completions chunks with usage in the last (`chat_chunks`). Pure functions of the whole answer,
so a stream and its whole form always say the same.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson


def typed_sse(event: dict[str, Any]) -> bytes:
    """One server-sent event named for its type, as Anthropic and the Responses API send them."""
    return b"event: " + event["type"].encode() + b"\ndata: " + orjson.dumps(event) + b"\n\n"


async def sse(events: list[dict[str, Any]]) -> AsyncIterator[bytes]:
    for event in events:
        yield typed_sse(event)


def message_events(message: dict[str, Any]) -> list[dict[str, Any]]:
    usage = message["usage"]
    start = dict(message, content=[], stop_reason=None, usage=dict(usage, output_tokens=1))
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    for i, block in enumerate(message["content"]):
        kind = block["type"]
        empty = {"thinking": {"thinking": "", "signature": ""}, "text": {"text": ""}, "tool_use": {"input": {}}}
        first = dict(block, **empty.get(kind, {}))
        events.append({"type": "content_block_start", "index": i, "content_block": first})
        if kind == "thinking":
            events.append(
                {
                    "type": "content_block_delta",
                    "index": i,
                    "delta": {"type": "thinking_delta", "thinking": block["thinking"]},
                }
            )
            events.append(
                {
                    "type": "content_block_delta",
                    "index": i,
                    "delta": {"type": "signature_delta", "signature": block["signature"]},
                }
            )
        elif kind == "text":
            events.append(
                {"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": block["text"]}}
            )
        elif kind == "tool_use":
            partial = orjson.dumps(block["input"]).decode()
            events.append(
                {
                    "type": "content_block_delta",
                    "index": i,
                    "delta": {"type": "input_json_delta", "partial_json": partial},
                }
            )
        events.append({"type": "content_block_stop", "index": i})
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": usage["output_tokens"]},
        }
    )
    events.append({"type": "message_stop"})
    return events


def response_events(response: dict[str, Any]) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": dict(response, status="in_progress", output=[], usage=None)}
    ]
    for i, item in enumerate(response["output"]):
        events.append({"type": "response.output_item.added", "output_index": i, "item": item})
        if item["type"] == "message":
            text = item["content"][0]["text"]
            events.append(
                {
                    "type": "response.output_text.delta",
                    "output_index": i,
                    "content_index": 0,
                    "item_id": item["id"],
                    "delta": text,
                }
            )
        elif item["type"] == "function_call":
            events.append(
                {
                    "type": "response.function_call_arguments.delta",
                    "output_index": i,
                    "item_id": item["id"],
                    "delta": item["arguments"],
                }
            )
        events.append({"type": "response.output_item.done", "output_index": i, "item": item})
    events.append({"type": "response.completed", "response": response})
    return [dict(event, sequence_number=n) for n, event in enumerate(events)]


async def chat_chunks(answer: dict[str, Any]) -> AsyncIterator[bytes]:
    base = {k: answer[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    message, finish = answer["choices"][0]["message"], answer["choices"][0]["finish_reason"]
    delta: dict[str, Any] = {"role": "assistant", "content": message["content"]}
    if message.get("tool_calls"):
        delta["tool_calls"] = [dict(call, index=n) for n, call in enumerate(message["tool_calls"])]
    chunks = [
        base | {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        base | {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
        base | {"choices": [], "usage": answer["usage"]},
    ]
    for chunk in chunks:
        yield b"data: " + orjson.dumps(chunk) + b"\n\n"
    yield b"data: [DONE]\n\n"
