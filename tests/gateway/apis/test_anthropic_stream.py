"""Chat chunks -> Anthropic stream events: each checked by the anthropic SDK's own event union,
in Anthropic's order, with `event:` lines the SDK needs."""

from __future__ import annotations

from typing import Any

import pytest
from anthropic.types import Message, RawMessageStreamEvent
from pydantic import TypeAdapter

from gateway.apis.anthropic.message import MessageMeta
from gateway.apis.anthropic.messages_stream import MessagesStream
from gateway.apis.chat import ChatUsage
from gateway.core.errors import UpstreamTimeout
from gateway.core.sse import typed_event
from tests.gateway.apis.chat_samples import Answer, Call, chunks

EVENT = TypeAdapter(RawMessageStreamEvent)
META = MessageMeta("msg_s1", "small", ("END",))


def translate(answer: Answer, with_usage: bool = True) -> list[dict[str, Any]]:
    stream = MessagesStream(META, input_tokens=40)
    events = stream.start()
    for chunk in chunks(answer, with_usage):
        events += stream.feed(chunk)
    events += stream.finish(ChatUsage(prompt_tokens=3, completion_tokens=1))
    for event in events:
        if event["type"] != "ping":  # a keep-alive, not part of the SDK's event union
            EVENT.validate_python(event)
    return events


def shape(events: list[dict[str, Any]]) -> list[str]:
    kinds: list[str] = []
    for event in events:
        kind = event["type"] + (f":{event['delta']['type']}" if event["type"] == "content_block_delta" else "")
        if not (kinds and kinds[-1] == kind and kind.startswith("content_block_delta")):
            kinds.append(kind)
    return kinds


TEXT = ["content_block_start", "content_block_delta:text_delta", "content_block_stop"]
TOOL = ["content_block_start", "content_block_delta:input_json_delta", "content_block_stop"]


@pytest.mark.parametrize(
    "answer, blocks",
    [
        (Answer("Hello there."), [TEXT]),
        (Answer(None, (Call("c1", "f", '{"city": "Oslo"}'),), "tool_calls"), [TOOL]),
        (Answer("Both:", (Call("c1", "f", '{"a": 1}'), Call("c2", "g", '{"b": 2}')), "tool_calls"), [TEXT, TOOL, TOOL]),
    ],
)
def test_event_order(answer: Answer, blocks: list[list[str]]) -> None:
    kinds = shape(translate(answer))
    flat = [kind for block in blocks for kind in block]
    assert kinds == ["message_start", flat[0], "ping", *flat[1:], "message_delta", "message_stop"]


def test_blocks_rebuild_the_answer() -> None:
    events = translate(Answer("Both:", (Call("c1", "f", '{"a": 1}'), Call("c2", "g", '{"b": 2}')), "tool_calls"))
    starts = [e for e in events if e["type"] == "content_block_start"]
    assert [e["index"] for e in starts] == [0, 1, 2]
    assert [e["content_block"].get("id") for e in starts] == [None, "c1", "c2"]
    json_of = {
        i: "".join(e["delta"]["partial_json"] for e in events if e["type"] == "content_block_delta" and e["index"] == i)
        for i in (1, 2)
    }
    assert json_of == {1: '{"a": 1}', 2: '{"b": 2}'}
    assert [e["index"] for e in events if e["type"] == "content_block_stop"] == [0, 1, 2]


@pytest.mark.parametrize(
    "answer, with_usage, reason, usage",
    [
        (Answer("x", prompt_tokens=30, completion_tokens=4, cached_tokens=10), True, "end_turn", (20, 10, 4)),
        (Answer("x", finish_reason="length"), False, "max_tokens", (3, 0, 1)),  # the fallback usage
        (Answer("x", extra_choice={"stop_reason": "END"}), True, "stop_sequence", (12, 0, 7)),
    ],
)
def test_message_delta(answer: Answer, with_usage: bool, reason: str, usage: tuple[int, int, int]) -> None:
    delta = translate(answer, with_usage)[-2]
    assert delta["delta"]["stop_reason"] == reason
    u = delta["usage"]
    assert (u["input_tokens"], u["cache_read_input_tokens"], u["output_tokens"]) == usage


def test_message_start_carries_the_estimate() -> None:
    start = translate(Answer("x"))[0]
    Message.model_validate(start["message"])
    assert start["message"]["usage"]["input_tokens"] == 40 and start["message"]["content"] == []


def test_sse_frames_have_event_lines() -> None:
    raw = b"".join(map(typed_event, translate(Answer("hi"))[:3])).decode()
    assert raw.startswith("event: message_start\ndata: {")
    assert "\n\nevent: content_block_start\ndata: " in raw and '\n\nevent: ping\ndata: {"type":"ping"}\n\n' in raw


def test_failure_is_an_error_event() -> None:
    event = MessagesStream.fail(UpstreamTimeout("the upstream stopped answering"))[0]
    assert event == {"type": "error", "error": {"type": "timeout_error", "message": "the upstream stopped answering"}}
