"""Chat answers -> Anthropic Messages, each checked by the anthropic SDK's own Message type."""

from __future__ import annotations

from typing import Any

import pytest
from anthropic.types import Message

from gateway.apis.anthropic.message import MessageMeta, to_message
from gateway.core.errors import UpstreamError
from tests.gateway.apis.chat_samples import Answer, Call, completion

META = MessageMeta("msg_0123", "small", ("END",))


def message(answer: Answer) -> Message:
    return Message.model_validate(to_message(completion(answer), META))


@pytest.mark.parametrize(
    "answer, reason, sequence",
    [
        (Answer("done"), "end_turn", None),
        (Answer("cut sh", finish_reason="length"), "max_tokens", None),
        (Answer(None, (Call("c", "f", "{}"),), "tool_calls"), "tool_use", None),
        (Answer("hidden", finish_reason="content_filter"), "refusal", None),
        (Answer(None, refusal="I can't help with that."), "refusal", None),
        (Answer("1 2 3", extra_choice={"stop_reason": "END"}), "stop_sequence", "END"),  # vLLM names it
        (Answer("1 2 3", extra_choice={"stop_reason": 128001}), "end_turn", None),  # an EOS token id
        (Answer("1 2 3", extra_choice={"stop_reason": "OTHER"}), "end_turn", None),  # not one of ours
    ],
)
def test_stop_reasons(answer: Answer, reason: str, sequence: str | None) -> None:
    m = message(answer)
    assert (m.stop_reason, m.stop_sequence) == (reason, sequence)


def test_content_blocks() -> None:
    m = message(Answer("Checking.", (Call("call_1", "f", '{"a": [1, 2]}'), Call("call_2", "g", "")), "tool_calls"))
    assert (m.id, m.type, m.role, m.model) == ("msg_0123", "message", "assistant", "small")
    assert [b.type for b in m.content] == ["text", "tool_use", "tool_use"]
    assert m.content[0].text == "Checking."
    assert [(b.id, b.name, b.input) for b in m.content[1:]] == [("call_1", "f", {"a": [1, 2]}), ("call_2", "g", {})]


def test_empty_answer_has_no_blocks() -> None:
    assert message(Answer("")).content == []


@pytest.mark.parametrize(
    "answer, usage",
    [
        (Answer("x", prompt_tokens=50, completion_tokens=9), (50, 0, 0, 9)),
        (Answer("x", prompt_tokens=50, completion_tokens=9, cached_tokens=32), (18, 32, 0, 9)),
    ],
)
def test_usage_counts_cache_reads_apart(answer: Answer, usage: tuple[int, ...]) -> None:
    u = message(answer).usage
    assert (u.input_tokens, u.cache_read_input_tokens, u.cache_creation_input_tokens, u.output_tokens) == usage


@pytest.mark.parametrize(
    "chat",
    [
        completion(Answer(None, (Call("c", "f", "{not json"),), "tool_calls")),
        completion(Answer(None, (Call("c", "f", "[1, 2]"),), "tool_calls")),
        {"choices": []},
        {"choices": [{"message": {"tool_calls": "nope"}}]},
    ],
)
def test_malformed_answers_are_upstream_errors(chat: dict[str, Any]) -> None:
    with pytest.raises(UpstreamError) as err:
        to_message(chat, META)
    assert err.value.status == 502
