"""policies/distill.py: kept requests -> chat fine-tuning examples, deduplicated and split."""

from __future__ import annotations

import pytest

from policies.distill import StoredText, build_export, example_of, fine_tuning_problem, held_back, prompt_key


def user(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def test_an_example_is_the_prompt_then_the_last_tiers_answer() -> None:
    messages = [
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "what is "}, {"type": "text", "text": "2 + 2?"}]},
        {"role": "assistant", "content": "Which base?"},
        {"role": "user", "content": "ten", "name": "alice"},
    ]
    example = example_of(StoredText(messages, "4"))
    assert example is not None
    assert example.line() == {
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "what is 2 + 2?"},
            {"role": "assistant", "content": "Which base?"},
            {"role": "user", "content": "ten"},
            {"role": "assistant", "content": "4"},
        ]
    }
    assert fine_tuning_problem(example.line()) is None


@pytest.mark.parametrize(
    "messages, answer",
    [
        ([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:,"}}]}], "a cat"),
        (
            [
                {"role": "user", "content": "weather?"},
                {"role": "assistant", "content": None, "tool_calls": [{"id": "1", "type": "function"}]},
                {"role": "tool", "tool_call_id": "1", "content": "sunny"},
            ],
            "sunny",
        ),
        ([{"role": "system", "content": "no question"}], "?"),
        (user("blank answer"), "  \n"),
        ("not a list", "x"),
        ([], "x"),
    ],
)
def test_a_request_that_is_not_a_text_chat_is_skipped(messages: object, answer: str) -> None:
    assert example_of(StoredText(messages, answer)) is None


def test_the_same_prompt_normalized_is_one_example_with_the_latest_answer() -> None:
    rows = [
        StoredText(user("What is  3+4?"), "7 (first)"),
        StoredText(user("other"), "o"),
        StoredText(user(" What is 3+4?\n"), "7 (latest)"),
        StoredText([{"role": "system", "content": "x"}, *user("What is 3+4?")], "with a system message: another"),
        StoredText([{"role": "tool", "content": "t"}], "skipped"),
    ]
    export = build_export(rows, holdout=0.0)
    assert (export.rows, export.skipped, export.duplicates) == (5, 1, 1)
    assert export.held_back == []
    assert [e.messages[-1]["content"] for e in export.train] == ["7 (latest)", "o", "with a system message: another"]


def test_the_split_follows_the_prompt_and_is_the_same_every_time() -> None:
    rows = [StoredText(user(f"question {i}"), f"answer {i}") for i in range(2000)]
    first = build_export(rows, holdout=0.1)
    again = build_export(reversed(rows), holdout=0.1)
    assert {e.key for e in first.held_back} == {e.key for e in again.held_back}
    assert not {e.key for e in first.held_back} & {e.key for e in first.train}
    assert 150 < len(first.held_back) < 250  # about a tenth
    for e in first.held_back:
        assert held_back(e.key, 0.1)
    # a prompt written differently (whitespace) falls on the same side
    assert prompt_key(user("question  7 ")) == prompt_key(user("question 7"))
    # a larger share keeps every prompt a smaller one held back
    assert {e.key for e in first.held_back} <= {e.key for e in build_export(rows, holdout=0.3).held_back}


def test_a_share_outside_0_to_1_is_refused() -> None:
    with pytest.raises(ValueError):
        build_export([], holdout=1.0)


@pytest.mark.parametrize(
    "line, why",
    [
        ([], "exactly the key `messages`"),
        (
            {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}], "extra": 1},
            "exactly the key `messages`",
        ),
        ({"messages": [{"role": "user", "content": "q"}]}, "at least two messages"),
        ({"messages": [{"role": "user", "content": "q"}, {"role": "user", "content": "a"}]}, "assistant answer"),
        ({"messages": [{"role": "system", "content": "s"}, {"role": "assistant", "content": "a"}]}, "no user message"),
        ({"messages": [{"role": "user", "content": ["q"]}, {"role": "assistant", "content": "a"}]}, "not a string"),
        ({"messages": [{"role": "tool", "content": "q"}, {"role": "assistant", "content": "a"}]}, "role 'tool'"),
        ({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": " "}]}, "assistant answer"),
    ],
)
def test_the_validator_refuses_what_fine_tuning_refuses(line: object, why: str) -> None:
    problem = fine_tuning_problem(line)
    assert problem is not None and why in problem  # refused, and for the reason the line has
