"""Upstreams that speak the Responses API: the body costgate sends them, and the usage it
reads back from a Response and from a stream's terminal event."""

from __future__ import annotations

from typing import Any

import pytest
from openai.types.responses import Response

from gateway.apis.responses.responses_native import finish_of, native_body, usage_of_event, usage_of_response
from policies.pricing import Usage

RESPONSE = {
    "id": "resp_1",
    "object": "response",
    "created_at": 1,
    "model": "gpt-4.1",
    "output": [],
    "parallel_tool_calls": True,
    "tool_choice": "auto",
    "tools": [],
    "status": "completed",
    "usage": {
        "input_tokens": 120,
        "input_tokens_details": {"cached_tokens": 100, "cache_write_tokens": 0},
        "output_tokens": 30,
        "output_tokens_details": {"reasoning_tokens": 10},
        "total_tokens": 150,
    },
}


def test_model_is_rewritten_and_nothing_else_without_history() -> None:
    body = {"model": "smart", "input": "hi", "tools": [{"type": "web_search"}], "include": ["file_search_call.results"]}
    assert native_body(body, "gpt-4.1") == body | {"model": "gpt-4.1", "store": False}


def test_resolved_history_is_inlined() -> None:
    history = [
        {"type": "message", "role": "user", "content": "a"},
        {"type": "reasoning", "id": "rs_1", "summary": []},  # the upstream kept it: cannot be resent
        {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": "gAAA"},
        {"type": "message", "role": "assistant", "content": "b"},
    ]
    out = native_body(
        {"model": "smart", "input": "c", "previous_response_id": "resp_0"}, "o4-mini", history, encrypted_reasoning=True
    )
    assert "previous_response_id" not in out and out["store"] is False
    assert [i.get("id", i.get("content")) for i in out["input"]] == ["a", "rs_2", "b", "c"]
    assert out["include"] == ["reasoning.encrypted_content"]


def test_usage_of_a_response() -> None:
    Response.model_validate(RESPONSE)
    assert usage_of_response(RESPONSE) == Usage(120, 30, 100, 10)


@pytest.mark.parametrize(
    "event, usage",
    [
        ({"type": "response.completed", "sequence_number": 9, "response": RESPONSE}, Usage(120, 30, 100, 10)),
        ({"type": "response.incomplete", "sequence_number": 9, "response": RESPONSE}, Usage(120, 30, 100, 10)),
        ({"type": "response.created", "sequence_number": 0, "response": RESPONSE | {"usage": None}}, None),
        ({"type": "response.output_text.delta", "delta": "x"}, None),
        ({"type": "response.completed", "response": {"usage": {"output_tokens": 3}}}, None),  # malformed
    ],
)
def test_usage_of_stream_events(event: dict[str, Any], usage: Usage | None) -> None:
    assert usage_of_event(event) == usage


def test_a_native_answer_reads_as_the_chat_answer_it_stands_for() -> None:
    from gateway.apis.responses.responses_native import chat_answer

    response = {
        "id": "resp_1",
        "object": "response",
        "model": "m",
        "status": "completed",
        "output": [
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Hi "}, {"type": "output_text", "text": "there"}],
            }
        ],
        "usage": {"input_tokens": 5, "output_tokens": 2, "input_tokens_details": {"cached_tokens": 1}},
    }
    chat = chat_answer(response)
    assert chat["choices"] == [
        {"index": 0, "message": {"role": "assistant", "content": "Hi there"}, "finish_reason": "stop"}
    ]
    assert chat["usage"] == {"prompt_tokens": 5, "completion_tokens": 2}
    call = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}
    assert chat_answer({"output": [call]})["choices"][0]["finish_reason"] == "tool_calls"


@pytest.mark.parametrize(
    "event, finish_reason",
    [
        ({"type": "response.completed", "response": {}}, "stop"),
        (
            {"type": "response.incomplete", "response": {"incomplete_details": {"reason": "max_output_tokens"}}},
            "length",
        ),
        (
            {"type": "response.incomplete", "response": {"incomplete_details": {"reason": "content_filter"}}},
            "content_filter",
        ),
        ({"type": "response.output_text.delta", "delta": "Hi"}, None),
    ],
)
def test_a_stream_says_how_it_ended_in_its_terminal_event(event: dict, finish_reason: str | None) -> None:
    assert finish_of(event) == finish_reason
