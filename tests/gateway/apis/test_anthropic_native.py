"""Upstreams that speak the Messages API: the usage read back from a Message and from a stream,
as costgate prices it (every prompt token, the cache reads marked)."""

from __future__ import annotations

import pytest
from anthropic.types import Message, RawMessageStreamEvent
from pydantic import TypeAdapter

from gateway.apis.anthropic.messages_native import StreamUsage, finish_of, native_body, usage_of_message
from policies.pricing import Usage

MESSAGE = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-haiku-4-5",
    "content": [],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {
        "input_tokens": 12,
        "cache_creation_input_tokens": 100,
        "cache_read_input_tokens": 400,
        "output_tokens": 30,
    },
}
# A real stream's usage events (Anthropic's documented shape): input on message_start, the
# cumulative counts on message_delta.
STREAM = [
    {
        "type": "message_start",
        "message": MESSAGE
        | {
            "stop_reason": None,
            "usage": {
                "input_tokens": 12,
                "cache_creation_input_tokens": 100,
                "cache_read_input_tokens": 400,
                "output_tokens": 1,
            },
        },
    },
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
    {"type": "content_block_stop", "index": 0},
    {
        "type": "message_delta",
        "delta": {"stop_reason": "end_turn", "stop_sequence": None},
        "usage": {"output_tokens": 30},
    },
    {"type": "message_stop"},
]


def test_model_is_the_only_rewrite() -> None:
    body = {"model": "fast", "max_tokens": 5, "messages": [], "thinking": {"type": "enabled", "budget_tokens": 2000}}
    assert native_body(body, "claude-haiku-4-5") == body | {"model": "claude-haiku-4-5"}


def test_usage_of_a_message() -> None:
    Message.model_validate(MESSAGE)
    # 12 input + 400 reads + 100 writes (5-minute: the message does not split them by TTL)
    assert usage_of_message(MESSAGE) == Usage(512, 30, 400, cache_write_tokens=100)
    split = MESSAGE["usage"] | {"cache_creation": {"ephemeral_5m_input_tokens": 40, "ephemeral_1h_input_tokens": 60}}
    assert usage_of_message({"usage": split}) == Usage(512, 30, 400, 0, 40, 60)
    assert usage_of_message({"usage": {"output_tokens": 3}}) is None


@pytest.mark.parametrize(
    "last_delta_usage, expected",
    [
        ({"output_tokens": 30}, Usage(512, 30, 400, cache_write_tokens=100)),
        # A message_delta may repeat the input side with new counts: they replace the start's.
        ({"output_tokens": 30, "input_tokens": 20, "cache_read_input_tokens": 0}, Usage(120, 30, 0, 0, 100)),
    ],
)
def test_usage_of_a_stream(last_delta_usage: dict, expected: Usage) -> None:
    events = STREAM[:4] + [STREAM[4] | {"usage": last_delta_usage}] + STREAM[5:]
    tracker = StreamUsage()
    for event in events:
        TypeAdapter(RawMessageStreamEvent).validate_python(event)
        tracker.feed(event)
    assert tracker.usage == expected


def test_no_usage_before_message_start() -> None:
    tracker = StreamUsage()
    tracker.feed({"type": "ping"})
    assert tracker.usage is None


def test_a_native_message_reads_as_the_chat_answer_it_stands_for() -> None:
    from gateway.apis.anthropic.messages_native import chat_answer

    message = {
        "id": "msg_1",
        "type": "message",
        "model": "m",
        "stop_reason": "tool_use",
        "content": [
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"q": "x"}},
        ],
        "usage": {"input_tokens": 3, "output_tokens": 4, "cache_read_input_tokens": 2},
    }
    chat = chat_answer(message)
    assert chat["choices"][0] == {
        "index": 0,
        "finish_reason": "tool_calls",
        "message": {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [{"id": "toolu_1", "type": "function", "function": {"name": "f", "arguments": '{"q":"x"}'}}],
        },
    }
    assert chat["usage"] == {"prompt_tokens": 5, "completion_tokens": 4}


def test_a_stream_says_how_it_ended_in_its_message_delta() -> None:
    assert [finish_of(event) for event in STREAM] == [None, None, None, None, "stop", None]
    tool_use = {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 3}}
    assert finish_of(tool_use) == "tool_calls"  # not an answer the caches keep
