"""The pipeline's chat stream, read back and translated: every piece it yields is one whole SSE
event (gateway/upstream/calls.py's relay, gateway/core/sse.py's replays), so each is a chunk, the usage chunk,
a comment, an error, or the held-back `[DONE]`. `translate` runs one API's stream translator
(gateway/apis) over it: comments (the cost line) pass as they are, and the closing events are
made only once `[DONE]` arrived — after the request was settled — or the stream failed.
"""

from __future__ import annotations

import enum
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from gateway.core.context import RequestContext
from gateway.core.errors import GatewayError, UpstreamError
from gateway.core.sse import typed_event


class Kind(enum.Enum):
    CHUNK = "chunk"  # a chat chunk (or the usage chunk): `data` is its JSON
    COMMENT = "comment"  # an SSE comment (the cost line): passed on as it is
    ERROR = "error"  # the stream failed after it began: the request's error is on the context
    DONE = "done"  # [DONE], which leaves the pipeline only once the request is settled


@dataclass(frozen=True, slots=True)
class ChatEvent:
    kind: Kind
    data: dict[str, Any] | None = None


def read_event(piece: bytes | str) -> ChatEvent:
    raw = piece.encode() if isinstance(piece, str) else bytes(piece)
    if not raw.startswith(b"data:"):
        return ChatEvent(Kind.COMMENT)
    payload = raw[5:].strip()
    if payload == b"[DONE]":
        return ChatEvent(Kind.DONE)
    data = orjson.loads(payload)
    if "error" in data and "choices" not in data:
        return ChatEvent(Kind.ERROR, data)
    return ChatEvent(Kind.CHUNK, data)


def stream_error(ctx: RequestContext) -> GatewayError:
    """The error a failed stream ended with (the relay put its status and message on `ctx`)."""
    err = UpstreamError(ctx.outcome.error or "the upstream stream failed")
    if ctx.outcome.status_code >= 400:
        err.status = ctx.outcome.status_code
    return err


def typed_data(piece: bytes | str) -> dict[str, Any] | None:
    """The JSON of a typed event (`event: NAME` then `data: {...}`), as a native upstream's
    stream is relayed; None for a comment."""
    raw = piece.encode() if isinstance(piece, str) else bytes(piece)
    start = raw.find(b"data:")
    if start < 0:
        return None
    data = orjson.loads(raw[start + 5 :].strip())
    return data if isinstance(data, dict) else None


class Translator(Protocol):
    """One API's stream translator (gateway/apis/*/*_stream.py)."""

    def start(self) -> list[dict[str, Any]]: ...

    def feed(self, chunk: Any) -> list[dict[str, Any]]: ...

    def fail(self, err: GatewayError) -> list[dict[str, Any]]: ...


async def translate(
    ctx: RequestContext,
    chat: AsyncIterator[Any],
    translator: Translator,
    finish: Callable[[], Awaitable[list[dict[str, Any]]]],
) -> AsyncIterator[bytes]:
    """The client's stream: `translator`'s events for `chat`, ended by `finish()` after [DONE]."""
    for event in translator.start():
        yield typed_event(event)
    done = False
    try:
        async for piece in chat:
            read = read_event(piece)
            if read.kind is Kind.CHUNK:
                for event in translator.feed(read.data):
                    yield typed_event(event)
            elif read.kind is Kind.COMMENT:
                yield piece.encode() if isinstance(piece, str) else bytes(piece)
            elif read.kind is Kind.DONE:
                done = True
    except GatewayError as err:  # a chunk that cannot be translated: the stream fails here
        ctx.outcome.failed(err.status, err.message)
        close = getattr(chat, "aclose", None)
        if close is not None:
            await close()  # settles the request (its ledger row carries this error)
        for event in translator.fail(err):
            yield typed_event(event)
        return
    for event in await finish() if done else translator.fail(stream_error(ctx)):
        yield typed_event(event)
