"""Context compression plans and summaries."""

from __future__ import annotations

import pytest

from policies.compression import SUMMARY_PREFIX, compressed, extractive_summary, split


def count(messages) -> int:
    return sum(len(str(m.get("content", "")).split()) + 1 for m in messages)


def conv(*roles: str) -> list[dict]:
    return [{"role": r, "content": f"{r} turn {i}. More words here."} for i, r in enumerate(roles)]


@pytest.mark.parametrize(
    "messages, budget, keep, expected",
    [
        # (head, older, recent) sizes; None: left alone
        (conv("system", "user", "assistant"), 1000, 2, None),  # fits
        (conv("system", "user", "assistant", "user"), 5, 2, (1, 1, 2)),
        (conv("user", "assistant", "user", "assistant", "user"), 5, 2, (0, 3, 2)),
        (conv("system", "developer", "user", "assistant", "user"), 5, 1, (2, 2, 1)),
        (conv("system", "user", "assistant"), 5, 2, None),  # nothing older than the window
        (conv("system", "user", "assistant", "tool", "user"), 5, 2, (1, 1, 3)),  # a tool result keeps its call
    ],
)
def test_plan(messages, budget, keep, expected) -> None:
    p = split(messages, budget, keep, count)
    assert (None if p is None else (len(p.head), len(p.older), len(p.recent))) == expected


def test_extractive_summary_keeps_newest_first_sentences_within_budget() -> None:
    older = [
        {"role": "user", "content": "First question about apples. Details follow."},
        {"role": "assistant", "content": "Apples are red. And more."},
        {"role": "user", "content": "Now pears?"},
    ]
    summary = extractive_summary(older, 1000, lambda s: len(s.split()))
    assert summary.splitlines() == [
        "- user: First question about apples.",
        "- assistant: Apples are red.",
        "- user: Now pears?",
    ]
    short = extractive_summary(older, 8, lambda s: len(s.split()))
    assert short.splitlines() == ["- user: Now pears?"]  # the newest turn wins the space


def test_compressed_keeps_head_and_recent() -> None:
    messages = conv("system", "user", "assistant", "user")
    p = split(messages, 5, 2, count)
    out = compressed(p, "sum")
    assert out[0] == messages[0] and out[-2:] == messages[-2:]
    assert out[1]["role"] == "system" and out[1]["content"] == SUMMARY_PREFIX + "sum"
