"""The exact cache's policy: what identifies a request, what may be cached, what is kept."""

from __future__ import annotations

import pytest

from policies.exact_cache import MAX_SEMANTIC_HISTORY, CachePolicy, answer_of, refusal, request_keys, semantic_refusal

USER = [{"role": "user", "content": "What is the capital of France?"}]
BASE = {"model": "small", "messages": USER, "temperature": 0}


def keys(body: dict, team: str = "t1", endpoint: str = "chat.completions"):
    return request_keys(team, endpoint, body)


@pytest.mark.parametrize(
    "variant",
    [
        {"stream": True},
        {"stream": True, "stream_options": {"include_usage": True}},
        {"user": "alice"},
        {"metadata": {"app": "x"}},
        {"top_p": 1},  # OpenAI's default, spelled out
        {"n": 1},
        {"presence_penalty": 0},
        {"seed": None},
    ],
)
def test_fields_that_cannot_change_the_answer_keep_the_key(variant: dict) -> None:
    assert keys({**BASE, **variant}).key == keys(BASE).key


@pytest.mark.parametrize(
    "variant",
    [
        {"temperature": 0.5},
        {"max_tokens": 5},
        {"seed": 7},
        {"top_p": 0.5},
        {"stop": ["\n"]},
        {"response_format": {"type": "json_object"}},
        {"tools": [{"type": "function", "function": {"name": "f"}}]},
        {"model": "large"},
        {"messages": [{"role": "system", "content": "Answer in French."}, *USER]},
    ],
)
def test_fields_that_change_the_answer_change_key_and_namespace(variant: dict) -> None:
    changed, base = keys({**BASE, **variant}), keys(BASE)
    assert changed.key != base.key
    assert changed.namespace != base.namespace


def test_the_question_changes_the_key_not_the_namespace() -> None:
    other = keys({**BASE, "messages": [{"role": "user", "content": "What is the capital of Spain?"}]})
    assert other.key != keys(BASE).key
    assert other.namespace == keys(BASE).namespace
    assert other.question == "What is the capital of Spain?"


def test_teams_and_endpoints_never_share_keys() -> None:
    assert keys(BASE, team="t1").namespace != keys(BASE, team="t2").namespace
    prompt = {"model": "small", "prompt": "What is the capital of France?", "temperature": 0}
    assert keys(prompt, endpoint="completions").namespace != keys(BASE).namespace


def test_earlier_turns_are_part_of_the_namespace() -> None:
    turn = [{"role": "user", "content": "Tell me about Paris."}, {"role": "assistant", "content": "Paris is..."}]
    with_history = keys({**BASE, "messages": [*turn, {"role": "user", "content": "How old is it?"}]})
    fresh = keys({**BASE, "messages": [{"role": "user", "content": "How old is it?"}]})
    assert with_history.namespace != fresh.namespace
    assert with_history.question == fresh.question == "How old is it?"


def test_non_text_questions_are_not_compared_semantically() -> None:
    image = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:,"}}]}]
    assert keys({**BASE, "messages": image}).question == ""


@pytest.mark.parametrize(
    "body, policy, refused",
    [
        ({"temperature": 0}, CachePolicy(), False),
        ({}, CachePolicy(), False),  # no temperature asked for: cached, as in other gateways
        ({"temperature": None}, CachePolicy(), False),
        ({"temperature": 1}, CachePolicy(), True),  # an explicit temperature above the limit is not
        ({"temperature": 0.01}, CachePolicy(), True),
        ({"temperature": 0.7}, CachePolicy(), True),
        ({"temperature": 0.7}, CachePolicy(max_temperature=1.0), False),  # the team opted in
        ({}, CachePolicy(max_temperature=1.0), False),
        ({"temperature": 0, "n": 2}, CachePolicy(), True),
        ({"temperature": 0, "logprobs": True}, CachePolicy(), True),
    ],
)
def test_refusal(body: dict, policy: CachePolicy, refused: bool) -> None:
    assert (refusal(body, policy) is not None) is refused


def _chat(message: dict, finish: str = "stop", choices: int = 1) -> dict:
    return {
        "model": "gpt-x",
        "choices": [{"index": i, "message": message, "finish_reason": finish} for i in range(choices)],
        "usage": {"prompt_tokens": 3, "completion_tokens": 4},
    }


@pytest.mark.parametrize(
    "body, kept",
    [
        (_chat({"role": "assistant", "content": "Paris."}), True),
        ({"model": "m", "choices": [{"index": 0, "text": "Paris.", "finish_reason": "stop"}]}, True),
        (
            _chat(
                {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function"}]}, "tool_calls"
            ),
            False,
        ),
        (_chat({"role": "assistant", "content": "x", "function_call": {"name": "f"}}), False),
        (_chat({"role": "assistant", "content": "Paris."}, choices=2), False),
        (_chat({"role": "assistant", "content": "blocked"}, "content_filter"), False),
        (_chat({"role": "assistant", "content": "", "reasoning_content": "all of max_tokens"}, "length"), False),
        (None, False),
        ({"error": {"message": "bad"}}, False),
    ],
)
def test_answer_of_keeps_only_plain_text_answers(body: dict | None, kept: bool) -> None:
    answer = answer_of(body, "small")
    assert (answer is not None) is kept
    if answer is not None:
        assert answer.text == "Paris." and answer.served_model == "small"


def _history(n: int) -> list[dict]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"} for i in range(n)]


@pytest.mark.parametrize(
    "body, refused",
    [
        (BASE, False),
        (BASE | {"tools": [{"type": "function", "function": {"name": "f"}}]}, True),
        (BASE | {"functions": [{"name": "f"}]}, True),
        (BASE | {"tools": []}, False),
        ({"model": "small", "messages": [*_history(MAX_SEMANTIC_HISTORY), *USER]}, False),
        ({"model": "small", "messages": [*_history(MAX_SEMANTIC_HISTORY + 1), *USER]}, True),
        ({"model": "small", "messages": [{"role": "system", "content": "s"}] * 9 + USER}, False),  # system aside
        ({"model": "small", "prompt": "q"}, False),
    ],
)
def test_agents_turns_are_not_compared_by_meaning(body: dict, refused: bool) -> None:
    assert (semantic_refusal(body) is not None) is refused
