"""Upstreams that serve the Messages API themselves: the client's body goes through with the
deployment's model name, and only the usage is read back, for pricing.

Anthropic counts `input_tokens` without the prompt-cache reads and writes; costgate's Usage
counts every prompt token and marks the cached ones, so prompt = input + cache reads + cache
writes, cached = cache reads. A stream's usage is cumulative: message_start carries the input
side, each message_delta the output so far (and the input side again when it changed).
Cache writes are priced as ordinary input tokens: the price map has no cache-write rate yet.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from policies.pricing import Usage


class MessagesUsage(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None


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
    return Usage(u.input_tokens + reads + writes, u.output_tokens or 0, reads)


def usage_of_message(message: Any) -> Usage | None:
    usage = _read(message.get("usage")) if isinstance(message, dict) else None
    return None if usage is None else _usage(usage)


class StreamUsage:
    """The usage of a native Messages stream, fed its events in order."""

    def __init__(self) -> None:
        self.seen = MessagesUsage()

    def feed(self, event: Any) -> None:
        kind = event.get("type") if isinstance(event, dict) else None
        if kind == "message_start":
            raw = (event.get("message") or {}).get("usage")
        elif kind == "message_delta":
            raw = event.get("usage")
        else:
            return
        update = _read(raw)
        if update is not None:  # later counts replace earlier ones; absent ones keep theirs
            self.seen = self.seen.model_copy(update=update.model_dump(exclude_none=True))

    @property
    def usage(self) -> Usage | None:
        return _usage(self.seen)
