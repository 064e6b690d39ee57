"""litellm's Messages passthrough stream (gateway/providers/litellm.py): the upstream's bytes split
into events, a malformed event refused with its own error, not litellm's catch-all."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from gateway.core.errors import UpstreamError
from gateway.providers.litellm import LiteLLMMessagesStream


async def chunks(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


async def events(*parts: bytes) -> list[str]:
    return [e.data["type"] async for e in LiteLLMMessagesStream(chunks(*parts), b"")]


async def test_events_are_split_across_chunks() -> None:
    start = b'event: message_start\ndata: {"type": "message_start"}\n\n'
    stop = b'event: message_stop\ndata: {"type": "message_stop"}\n\n'
    assert await events(start[:20], start[20:] + stop[:9], stop[9:]) == ["message_start", "message_stop"]


@pytest.mark.parametrize(
    "frame, code",
    [
        (b"data: {not json\n\n", "bad_upstream_stream"),
        (b"data: [1, 2]\n\n", "bad_upstream_stream"),
        (b'data: {"type": "error", "error": {"type": "overloaded_error"}}\n\n', "upstream_stream_error"),
    ],
)
async def test_a_malformed_event_keeps_its_own_error(frame: bytes, code: str) -> None:
    with pytest.raises(UpstreamError) as raised:
        await events(b'data: {"type": "message_start"}\n\n', frame)
    assert raised.value.code == code
