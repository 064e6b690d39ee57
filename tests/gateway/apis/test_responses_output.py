"""Chat answers -> Response objects, each checked by the openai SDK's own Response type."""

from __future__ import annotations

from typing import Any

import pytest
from openai.types.responses import Response

from gateway.apis.responses.output import ResponseMeta, to_response
from gateway.apis.responses.responses_request import parse_request
from gateway.core.errors import UpstreamError
from tests.gateway.apis.chat_samples import Answer, Call, completion

META = ResponseMeta("resp_0123", 1_754_925_861, "small")


def respond(answer: Answer, **request: Any) -> Response:
    req = parse_request({"model": "small", "input": "q", **request})
    return Response.model_validate(to_response(completion(answer), req, META))


@pytest.mark.parametrize(
    "finish, status, reason",
    [
        ("stop", "completed", None),
        ("tool_calls", "completed", None),
        ("length", "incomplete", "max_output_tokens"),
        ("content_filter", "incomplete", "content_filter"),
    ],
)
def test_finish_reason_sets_status(finish: str, status: str, reason: str | None) -> None:
    response = respond(Answer("some text", finish_reason=finish))
    assert response.status == status
    assert (response.incomplete_details.reason if response.incomplete_details else None) == reason
    assert response.output[0].status == ("incomplete" if reason else "completed")


def test_text_and_calls_become_output_items() -> None:
    calls = (Call("call_1", "a", "{}"), Call("call_2", "b", '{"x": 1}'))
    response = respond(Answer("Working on it.", calls, "tool_calls"))
    assert [item.type for item in response.output] == ["message", "function_call", "function_call"]
    message = response.output[0]
    assert message.role == "assistant" and message.id.startswith("msg_")
    assert [(p.type, p.text, p.annotations) for p in message.content] == [("output_text", "Working on it.", [])]
    assert [(c.id[:3], c.call_id, c.name, c.arguments, c.status) for c in response.output[1:]] == [
        ("fc_", "call_1", "a", "{}", "completed"),
        ("fc_", "call_2", "b", '{"x": 1}', "completed"),
    ]
    assert len({item.id for item in response.output}) == 3
    assert response.output_text == "Working on it."


def test_only_tool_calls_make_no_message() -> None:
    response = respond(Answer(None, (Call("call_1", "a", "{}"),), "tool_calls"))
    assert [item.type for item in response.output] == ["function_call"]


def test_refusal_is_a_refusal_part() -> None:
    response = respond(Answer(None, refusal="I can't help with that."))
    assert [(p.type, p.refusal) for p in response.output[0].content] == [("refusal", "I can't help with that.")]


@pytest.mark.parametrize(
    "answer, usage",
    [
        (Answer("x", prompt_tokens=100, completion_tokens=20), (100, 0, 20, 0, 120)),
        (
            Answer("x", prompt_tokens=100, completion_tokens=20, cached_tokens=64, reasoning_tokens=12),
            (100, 64, 20, 12, 120),
        ),
    ],
)
def test_usage_and_its_details(answer: Answer, usage: tuple[int, ...]) -> None:
    u = respond(answer).usage
    assert (
        u.input_tokens,
        u.input_tokens_details.cached_tokens,
        u.output_tokens,
        u.output_tokens_details.reasoning_tokens,
        u.total_tokens,
    ) == usage


def test_envelope_echoes_the_request_with_openai_defaults() -> None:
    plain = respond(Answer("x"))
    assert (plain.object, plain.id, plain.created_at, plain.model) == ("response", "resp_0123", 1_754_925_861, "small")
    assert (
        plain.temperature,
        plain.top_p,
        plain.tool_choice,
        plain.tools,
        plain.parallel_tool_calls,
        plain.truncation,
        plain.metadata,
        plain.store,
    ) == (1.0, 1.0, "auto", [], True, "disabled", {}, True)
    assert plain.text.format.type == "text" and plain.error is None
    tool = {"type": "function", "name": "f", "parameters": {"type": "object"}}
    asked = respond(
        Answer("x"),
        temperature=0.3,
        top_p=0.5,
        tools=[tool],
        tool_choice="required",
        store=False,
        parallel_tool_calls=False,
        metadata={"k": "v"},
        user="u",
        max_output_tokens=9,
        text={"format": {"type": "json_object"}},
        reasoning={"effort": "high"},
    )
    assert (
        asked.temperature,
        asked.top_p,
        asked.tool_choice,
        asked.parallel_tool_calls,
        asked.store,
        asked.metadata,
        asked.user,
        asked.max_output_tokens,
    ) == (0.3, 0.5, "required", False, False, {"k": "v"}, "u", 9)
    assert asked.tools[0].name == "f" and asked.tools[0].strict is None
    assert asked.text.format.type == "json_object" and asked.reasoning.effort == "high"


@pytest.mark.parametrize("body", [{"choices": []}, {"choices": [{"message": {"content": 5}}]}, "not a dict"])
def test_malformed_chat_answers_are_upstream_errors(body: Any) -> None:
    req = parse_request({"model": "small", "input": "q"})
    with pytest.raises(UpstreamError) as err:
        to_response(body, req, META)
    assert err.value.status == 502
