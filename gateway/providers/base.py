"""The one interface every upstream implements, and the values that cross it.

A provider turns an `UpstreamCall` into either a `Completion` (whole answer) or an
`UpstreamStream` (server-sent events, relayed as they arrive). It raises only the
`UpstreamError` family from gateway.core.errors, or `InvalidRequest` when the upstream blamed
the request itself (its 4xx), so callers need no provider-specific handling.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

from engine.admission import Priority
from gateway.core.context import Endpoint
from gateway.core.request_view import asked_output_tokens, completion_count
from gateway.core.tokens import count_prompt
from policies.pricing import Usage


@dataclass(frozen=True, slots=True)
class UpstreamCall:
    endpoint: Endpoint
    body: dict[str, Any]  # the client's body, `model` already rewritten to the upstream's name
    stream: bool = False
    # The request's class; a replica set admits by it, and vLLM replicas get it as `priority`.
    priority: Priority = Priority.INTERACTIVE
    # Sent along as they are: the trace context (gateway/upstream/tracing.py), and to an upstream of a
    # native API the client's headers of that API (Messages: anthropic-version, anthropic-beta;
    # gateway/compat/messages_api.py) — never a credential or a host.
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Completion:
    body: dict[str, Any]
    raw: bytes  # the upstream's bytes, relayed untouched when nothing in them needs to change
    usage: Usage | None  # None when the upstream reported none


@dataclass(frozen=True, slots=True)
class StreamEvent:
    """One SSE `data:` event: its raw payload and the parsed JSON object."""

    raw: bytes
    data: dict[str, Any]


class UpstreamStream(Protocol):
    def __aiter__(self) -> AsyncIterator[StreamEvent]: ...

    async def aclose(self) -> None: ...


class Provider(Protocol):
    name: str

    async def complete(self, call: UpstreamCall) -> Completion: ...

    async def open_stream(self, call: UpstreamCall) -> UpstreamStream:
        """Start a stream; errors before the first event raise here, so they can be retried."""
        ...

    async def aclose(self) -> None: ...


def usage_from(data: dict[str, Any] | None) -> Usage | None:
    """OpenAI's `usage` object (chat, completions or embeddings) as a Usage. litellm adds an
    Anthropic upstream's cache writes to it: `prompt_tokens_details.cache_creation_tokens` (or
    the top-level `cache_creation_input_tokens`), split by TTL in `cache_creation_token_details`."""
    if not isinstance(data, dict):
        return None
    prompt, completion = data.get("prompt_tokens"), data.get("completion_tokens") or 0
    if not (isinstance(prompt, int) and _is_count(prompt) and _is_count(completion)) or any(
        n < 0 for n in _numbers_in(data)
    ):
        return None  # a negative or odd count is no usage: charged as unreported (the hold's bound), never credited
    writes = _detail(data, "prompt_tokens_details", "cache_creation_tokens") or _count(
        data, "cache_creation_input_tokens"
    )
    split = data.get("prompt_tokens_details") or {}
    hour = _detail(split, "cache_creation_token_details", "ephemeral_1h_input_tokens") if isinstance(split, dict) else 0
    return Usage(
        prompt,
        completion,
        _detail(data, "prompt_tokens_details", "cached_tokens"),
        _detail(data, "completion_tokens_details", "reasoning_tokens"),
        cache_write_tokens=max(writes - hour, 0),
        cache_write_1h_tokens=min(hour, writes) if writes else hour,
    )


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _numbers_in(usage: dict[str, Any]) -> list[int | float]:
    """Every number a usage object carries, its details' included."""
    found: list[int | float] = []
    for value in usage.values():
        if isinstance(value, dict):
            found += _numbers_in(value)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            found.append(value)
    return found


def _count(usage: dict[str, Any], name: str) -> int:
    value = usage.get(name)
    return value if isinstance(value, int) else 0


def _detail(usage: dict[str, Any], details: str, name: str) -> int:
    """A count inside one of usage's `*_details` objects; 0 when absent or malformed."""
    found = usage.get(details)
    value = found.get(name) if isinstance(found, dict) else None
    return value if isinstance(value, int) else 0


def redact(raw: bytes, secret: bytes) -> bytes:
    """An upstream (or a proxy before it) that echoes the provider key, in an error message or
    an answer, must not hand it on to the client."""
    return raw.replace(secret, b"[redacted]") if secret and secret in raw else raw


def call_weight(call: UpstreamCall, default_max_output: int) -> int:
    """What a call may occupy on a model server: its prompt plus the output it may produce (the
    client's cap, else `default_max_output`) for every completion it makes. What replica admission
    balances and the local engine counts as outstanding."""
    body = call.body
    asked = asked_output_tokens(body)
    output = default_max_output if asked is None else asked
    return count_prompt(body, str(body.get("model", ""))) + output * completion_count(body)
