"""Upstreams that serve the Messages API themselves: the client's body goes through with the
deployment's model name, and only the usage is read back, for pricing.

Anthropic counts `input_tokens` without the prompt-cache reads and writes; costgate's Usage
counts every prompt token and marks the cached ones, so prompt = input + cache reads + cache
writes, cached = cache reads, and the writes split by TTL (`cache_creation`'s 5-minute and
1-hour counts; writes it does not split are 5-minute ones, Anthropic's default). A stream's usage
is cumulative: message_start carries the input side, each message_delta the output so far (and
the input side again when it changed).
"""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, NonNegativeInt, ValidationError

from gateway.apis.chat import stands_for
from policies.pricing import Usage


class CacheCreation(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)
    ephemeral_5m_input_tokens: NonNegativeInt | None = None
    ephemeral_1h_input_tokens: NonNegativeInt | None = None


class MessagesUsage(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)
    # Negative counts fail validation, so such a usage is none (charged as unreported, never credited).
    input_tokens: NonNegativeInt | None = None
    output_tokens: NonNegativeInt | None = None
    cache_read_input_tokens: NonNegativeInt | None = None
    cache_creation_input_tokens: NonNegativeInt | None = None
    cache_creation: CacheCreation | None = None


def native_body(body: dict[str, Any], upstream_model: str) -> dict[str, Any]:
    return dict(body, model=upstream_model)


def _read(raw: Any) -> MessagesUsage | None:
    if not isinstance(raw, dict):
        return None
    try:
        return MessagesUsage.model_validate(raw)
    except ValidationError:
        return None


def _usage(u: MessagesUsage) -> Usage | None:
    if u.input_tokens is None:
        return None
    reads, writes = u.cache_read_input_tokens or 0, u.cache_creation_input_tokens or 0
    hour = min((u.cache_creation.ephemeral_1h_input_tokens or 0) if u.cache_creation else 0, writes)
    return Usage(
        u.input_tokens + reads + writes,
        u.output_tokens or 0,
        reads,
        cache_write_tokens=writes - hour,
        cache_write_1h_tokens=hour,
    )


def usage_of_message(message: Any) -> Usage | None:
    usage = _read(message.get("usage")) if isinstance(message, dict) else None
    return None if usage is None else _usage(usage)


class StreamUsage:
    """The usage of a native Messages stream, fed its events in order."""

    def __init__(self) -> None:
        self.seen = MessagesUsage()
        self.complete = False  # message_delta brought the final counts (message_start's come before any output)

    def feed(self, event: Any) -> None:
        kind = event.get("type") if isinstance(event, dict) else None
        if kind == "message_start":
            raw = (event.get("message") or {}).get("usage")
        elif kind == "message_delta":
            raw = event.get("usage")
            self.complete = True
        else:
            return
        update = _read(raw)
        if update is not None:  # later counts replace earlier ones; absent ones keep theirs
            merged = self.seen.model_dump(exclude_none=True) | update.model_dump(exclude_none=True)
            self.seen = MessagesUsage.model_validate(merged)  # nested counts stay a model, not a dict

    @property
    def usage(self) -> Usage | None:
        return _usage(self.seen)


# A relayed stream: which events carry generated text, which are held until the request is
# settled (message_delta carries the final usage, where the cost is added; message_stop ends
# the stream), and the event a stream cut at its budget hold ends with.
HELD_EVENTS = frozenset({"message_delta", "message_stop"})
FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}


def event_text(event: dict[str, Any]) -> tuple[str, str]:
    """(answer text, other generated text such as a tool's input) of one stream event."""
    delta = event.get("delta") if event.get("type") == "content_block_delta" else None
    if not isinstance(delta, dict):
        return "", ""
    if delta.get("type") == "text_delta" and isinstance(delta.get("text"), str):
        return delta["text"], ""
    other = delta.get("partial_json") or delta.get("thinking")
    return "", other if isinstance(other, str) else ""


def held(event: dict[str, Any]) -> bool:
    return event.get("type") in HELD_EVENTS


def priced(event: dict[str, Any], cost: str) -> dict[str, Any]:
    """message_delta with the request's cost as `usage.cost_usd` (other events as they are)."""
    if event.get("type") == "message_delta" and isinstance(event.get("usage"), dict):
        event["usage"]["cost_usd"] = cost
    return event


def error_event(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


def finish_of(event: dict[str, Any]) -> str | None:
    """The chat `finish_reason` a stream event says the Message ended for (its message_delta)."""
    delta = event.get("delta") if event.get("type") == "message_delta" else None
    reason = delta.get("stop_reason") if isinstance(delta, dict) else None
    return FINISH.get(reason, "stop") if isinstance(reason, str) else None


def generated_text(message: Any) -> str:
    """All a Message generated, a block's field a line (text, thinking, a tool call's name and
    input): what a charge counts when the Message came without usage."""
    parts: list[Any] = []
    for block in (message.get("content") if isinstance(message, dict) else None) or ():
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind in ("text", "thinking"):
            parts.append(block.get(kind))
        elif kind == "tool_use":
            parts += [block.get("name"), orjson.dumps(block.get("input") or {}).decode()]
    return "\n".join(p for p in parts if isinstance(p, str) and p)


def chat_answer(message: Any) -> dict[str, Any]:
    """A Message as the Chat Completions answer it stands for (`chat.stands_for`)."""
    body = message if isinstance(message, dict) else {}
    blocks = [b for b in body.get("content") or () if isinstance(b, dict)]
    text = "".join(b["text"] for b in blocks if b.get("type") == "text" and isinstance(b.get("text"), str))
    calls = [
        {
            "id": b.get("id"),
            "type": "function",
            "function": {"name": b.get("name"), "arguments": orjson.dumps(b.get("input") or {}).decode()},
        }
        for b in blocks
        if b.get("type") == "tool_use"
    ]
    finish = FINISH.get(str(body.get("stop_reason")), "stop")
    return stands_for(body, text or None, calls, finish, usage_of_message(body))
