"""Reading questions and answers out of OpenAI bodies (gateway/core/bodies.py)."""

from __future__ import annotations

import pytest

from gateway.core.bodies import answer_text, generated_text, query_text, token_logprobs


@pytest.mark.parametrize(
    "logprobs, expected",
    [
        ({"content": [{"token": "a", "logprob": -0.5}, {"token": "b", "logprob": -1}]}, (-0.5, -1.0)),
        ({"token_logprobs": [-0.2, None, -0.3]}, (-0.2, -0.3)),
        ({"content": []}, None),
        (None, None),
        ("x", None),
    ],
)
def test_token_logprobs(logprobs, expected) -> None:
    assert token_logprobs(logprobs) == expected


CHAT = {"choices": [{"message": {"role": "assistant", "content": "one"}}, {"message": {"content": "two"}}]}
TEXT = {"choices": [{"text": "a"}, {"text": "b"}]}


TOOL_CALL = {
    "choices": [
        {
            "message": {
                "role": "assistant",
                "content": None,
                "reasoning_content": "think. ",
                "tool_calls": [{"id": "call_9", "type": "function", "function": {"name": "f", "arguments": '{"x":1}'}}],
            }
        }
    ]
}


@pytest.mark.parametrize(
    "body, text, generated",
    [
        (CHAT, "one", "one\ntwo"),  # fields apart: no token spans two
        (TEXT, "a", "a\nb"),
        (TOOL_CALL, "", 'think. \nf\n{"x":1}'),  # what was generated, not the ids, types and role
        ({"choices": "garbage"}, "", ""),
        ({}, "", ""),
    ],
)
def test_answer_text_and_all_that_was_generated(body: dict, text: str, generated: str) -> None:
    assert answer_text(body) == text
    assert generated_text(body) == generated


@pytest.mark.parametrize(
    "body, expected",
    [
        (
            {
                "messages": [
                    {"role": "user", "content": "first"},
                    {"role": "assistant", "content": "x"},
                    {"role": "user", "content": "last"},
                ]
            },
            "last",
        ),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "a"},
                            {"type": "image_url", "image_url": {"url": "u"}},
                            {"type": "text", "text": "b"},
                        ],
                    }
                ]
            },
            "a b",
        ),
        ({"messages": [{"role": "system", "content": "only system"}]}, ""),
        ({"prompt": "complete me"}, "complete me"),
        ({"prompt": ["a", "b"]}, ""),
    ],
)
def test_query_text(body: dict, expected: str) -> None:
    assert query_text(body) == expected
