"""Chat chunks -> Responses stream events: every event checked by the openai SDK's own event
union, in OpenAI's order, with consecutive sequence numbers."""

from __future__ import annotations

from typing import Any

import pytest
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from gateway.apis.chat import ChatUsage
from gateway.apis.responses.output import ResponseMeta
from gateway.apis.responses.responses_request import parse_request
from gateway.apis.responses.responses_stream import ResponsesStream
from gateway.core.errors import UpstreamTimeout
from policies.pricing import Usage
from tests.gateway.apis.chat_samples import Answer, Call, chunks

EVENT = TypeAdapter(ResponseStreamEvent)
META = ResponseMeta("resp_s1", 1_754_925_861, "small")
TEXT_ITEM = [
    "response.output_item.added",
    "response.content_part.added",
    "response.output_text.delta",
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
]
CALL_ITEM = [
    "response.output_item.added",
    "response.function_call_arguments.delta",
    "response.function_call_arguments.done",
    "response.output_item.done",
]


def translate(answer: Answer, with_usage: bool = True, **request: Any) -> tuple[list[dict[str, Any]], ResponsesStream]:
    stream = ResponsesStream(parse_request({"model": "small", "input": "q", "stream": True, **request}), META)
    events = stream.start()
    for chunk in chunks(answer, with_usage):
        events += stream.feed(chunk)
    events += stream.finish(ChatUsage(prompt_tokens=3, completion_tokens=1))
    for event in events:
        EVENT.validate_python(event)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    return events, stream


def shape(events: list[dict[str, Any]]) -> list[str]:
    """Event types with runs of deltas folded into one, to compare against OpenAI's order."""
    kinds: list[str] = []
    for event in events:
        if not (event["type"].endswith(".delta") and kinds and kinds[-1] == event["type"]):
            kinds.append(event["type"])
    return kinds


@pytest.mark.parametrize(
    "answer, items",
    [
        (Answer("Hello, world."), [TEXT_ITEM]),
        (Answer(None, (Call("c1", "f", '{"a": 1}'),), "tool_calls"), [CALL_ITEM]),
        (
            Answer("Let me check.", (Call("c1", "f", "{}"), Call("c2", "g", '{"b": 22}')), "tool_calls"),
            [TEXT_ITEM, CALL_ITEM, CALL_ITEM],
        ),
    ],
)
def test_event_order(answer: Answer, items: list[list[str]]) -> None:
    events, stream = translate(answer)
    expected = [
        "response.created",
        "response.in_progress",
        *(kind for item in items for kind in item),
        "response.completed",
    ]
    assert shape(events) == expected
    final = Response.model_validate(events[-1]["response"])
    assert final.status == "completed" and [i.type for i in final.output] == [
        "message" if item is TEXT_ITEM else "function_call" for item in items
    ]
    assert stream.response == events[-1]["response"]


def test_items_keep_their_ids_and_indexes() -> None:
    events, _ = translate(Answer("Hi.", (Call("c1", "f", '{"q": "x"}'),), "tool_calls"))
    added = [e for e in events if e["type"] == "response.output_item.added"]
    done = [e for e in events if e["type"] == "response.output_item.done"]
    assert [e["output_index"] for e in added] == [0, 1] == [e["output_index"] for e in done]
    assert [e["item"]["id"] for e in added] == [e["item"]["id"] for e in done]
    assert all(e["item_id"] == added[0]["item"]["id"] for e in events if e["type"].startswith("response.output_text"))
    args = [e for e in events if e["type"].startswith("response.function_call_arguments")]
    assert {e["item_id"] for e in args} == {added[1]["item"]["id"]} and {e["output_index"] for e in args} == {1}
    assert "".join(e["delta"] for e in args[:-1]) == args[-1]["arguments"] == '{"q": "x"}'
    assert args[-1]["name"] == "f" and done[1]["item"]["call_id"] == "c1"
    assert done[0]["item"]["content"][0]["text"] == "Hi." and done[1]["item"]["status"] == "completed"


def test_length_finish_ends_incomplete() -> None:
    events, _ = translate(Answer("Cut sh", finish_reason="length"))
    assert events[-1]["type"] == "response.incomplete"
    final = Response.model_validate(events[-1]["response"])
    assert final.status == "incomplete" and final.incomplete_details.reason == "max_output_tokens"
    assert final.output[0].status == "incomplete"


def test_refusal_streams_as_refusal_events() -> None:
    events, _ = translate(Answer(None, refusal="I can't help."))
    assert shape(events)[2:-1] == [
        "response.output_item.added",
        "response.content_part.added",
        "response.refusal.delta",
        "response.refusal.done",
        "response.content_part.done",
        "response.output_item.done",
    ]
    assert events[-1]["response"]["output"][0]["content"] == [{"type": "refusal", "refusal": "I can't help."}]


@pytest.mark.parametrize("with_usage, expected", [(True, (12, 7)), (False, (3, 1))])
def test_usage_comes_from_the_upstream_else_the_fallback(with_usage: bool, expected: tuple[int, int]) -> None:
    events, _ = translate(Answer("x"), with_usage=with_usage)
    usage = events[-1]["response"]["usage"]
    assert (usage["input_tokens"], usage["output_tokens"]) == expected


def test_fallback_from_what_costgate_charged() -> None:
    stream = ResponsesStream(parse_request({"model": "small", "input": "q", "stream": True}), META)
    stream.start()
    stream.feed(chunks(Answer("x"), with_usage=False)[1])
    usage = stream.finish(ChatUsage.of(Usage(40, 9, 32)))[-1]["response"]["usage"]
    assert (
        usage["input_tokens"],
        usage["input_tokens_details"]["cached_tokens"],
        usage["output_tokens"],
        usage["total_tokens"],
    ) == (40, 32, 9, 49)


def test_failure_mid_stream_ends_with_response_failed() -> None:
    stream = ResponsesStream(parse_request({"model": "small", "input": "q", "stream": True}), META)
    events = stream.start() + stream.feed(chunks(Answer("partial answer"))[1])
    events += stream.fail(UpstreamTimeout("the upstream stopped answering"))
    for event in events:
        EVENT.validate_python(event)
    assert events[-1]["type"] == "response.failed"
    failed = Response.model_validate(events[-1]["response"])
    assert failed.status == "failed" and failed.error.code == "server_error"
    assert failed.error.message == "the upstream stopped answering"
