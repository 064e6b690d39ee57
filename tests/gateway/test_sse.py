"""Server-sent events (gateway/core/sse.py): replayed answers and the tail every stream ends with."""

from __future__ import annotations

import orjson
import pytest

from gateway.core.context import Endpoint
from gateway.core.sse import SSE_DONE, StreamEnd, chunk_text, chunks, replay, stream_tail
from policies.pricing import Usage

CHAT = {
    "id": "x",
    "created": 1,
    "model": "m",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "one two three four five"}, "finish_reason": "stop"}
    ],
}


def test_replay_chunks_carry_content_and_finish() -> None:
    events = chunks(Endpoint.CHAT, CHAT)
    assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": "one two three four five"}
    assert events[-1]["choices"][0]["finish_reason"] == "stop"
    assert all(e["object"] == "chat.completion.chunk" and e["id"] == "x" for e in events)


def test_chunks_in_pieces_rebuild_the_text() -> None:
    events = chunks(Endpoint.CHAT, CHAT, words_per_chunk=2)
    assert len(events) == 4  # three content chunks, one finish
    assert "".join(chunk_text(Endpoint.CHAT, e) for e in events) == "one two three four five"
    assert "role" in events[0]["choices"][0]["delta"] and "role" not in events[1]["choices"][0]["delta"]


def test_completions_chunks() -> None:
    body = {"id": "c", "choices": [{"index": 0, "text": "abc", "finish_reason": "length"}]}
    events = chunks(Endpoint.COMPLETIONS, body)
    assert [e["object"] for e in events] == ["text_completion", "text_completion"]
    assert chunk_text(Endpoint.COMPLETIONS, events[0]) == "abc"
    assert events[-1]["choices"][0]["finish_reason"] == "length"


def test_tool_calls_are_replayed_with_indexes() -> None:
    call = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    body = {"choices": [{"message": {"content": None, "tool_calls": [call]}, "finish_reason": "tool_calls"}]}
    first = chunks(Endpoint.CHAT, body)[0]["choices"][0]["delta"]
    assert first["tool_calls"] == [{**call, "index": 0}]


@pytest.mark.parametrize("include_usage", [True, False])
def test_stream_tail(include_usage: bool) -> None:
    reported = {"prompt_tokens_details": {"cached_tokens": 1, "audio_tokens": 0}, "completion_tokens_details": 7}
    tail = list(stream_tail({"id": "x", "model": "m"}, Usage(3, 4, 1, 2), "0.5", include_usage, reported))
    assert tail[-1] == SSE_DONE and isinstance(tail[-1], StreamEnd)
    assert tail[-2] == b": x-costgate-cost-usd=0.5\n\n"
    if include_usage:
        usage = orjson.loads(tail[0].removeprefix(b"data: "))["usage"]
        assert usage == {
            "prompt_tokens": 3,
            "completion_tokens": 4,
            "total_tokens": 7,
            # the upstream's details kept (a malformed one left out), the charged counts set
            "prompt_tokens_details": {"cached_tokens": 1, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 2},
            "cost_usd": "0.5",
        }
    else:
        assert len(tail) == 2


async def test_replay_ends_with_the_tail() -> None:
    out = [part async for part in replay(Endpoint.CHAT, CHAT, Usage(1, 2), "0", True)]
    assert out[-1] is SSE_DONE
    assert sum(1 for part in out if b'"usage"' in part) == 1
