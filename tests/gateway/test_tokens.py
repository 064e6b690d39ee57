"""gateway/core/tokens.py counts any text: a long run that tiktoken's pattern cannot take whole (issue
24: a million tabs made it panic) is counted in spans, cut where tiktoken's own pieces meet, so
ordinary text counts exactly as tiktoken counts it whole."""

from __future__ import annotations

import pytest

from gateway.core.tokens import SAFE_SPAN, count_messages, count_prompt, count_text, encoding_for, spans

MODELS = ["gpt-4o-mini", "gpt-3.5-turbo"]  # o200k_base (the one that panicked), cl100k_base
ENGLISH = "The quick brown fox, it's 12,345 km away!\n\n  Then it jumps — twice. " * 20_000


@pytest.mark.parametrize("run", ["\t", " ", "\x0c", "\u3000", " \t"])
def test_a_million_of_any_whitespace_is_counted(run: str) -> None:
    model = "gpt-4o-mini"  # o200k_base: cl100k_base's pattern takes these whole
    text = run * (1_000_000 // len(run))
    tokens = count_text(text, model)
    assert 0 < tokens <= len(text)
    assert count_prompt({"messages": [{"role": "user", "content": text}]}, model) > tokens
    assert count_messages([{"role": "user", "content": text, "tool_calls": [{"function": {"arguments": text}}]}], model)


@pytest.mark.parametrize("model", MODELS)
def test_long_english_counts_as_tiktoken_counts_it_whole(model: str) -> None:
    assert count_text(ENGLISH, model) == len(encoding_for(model).encode_ordinary(ENGLISH))


def test_spans_cover_the_text_and_stay_short() -> None:
    for text in (ENGLISH, "\t" * 100_000, "x" * 100_000, "a " * 50_000, ""):
        pieces = list(spans(text))
        assert "".join(pieces) == text
        assert all(len(p) <= SAFE_SPAN for p in pieces)
