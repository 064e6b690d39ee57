"""A provider's usage is read only when its counts are counts (issue 24): a negative or odd count
would price the call below zero and credit the team, so such a usage is no usage at all, and
the call is charged as unreported (the hold's bound), never less."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.apis.anthropic.messages_native import usage_of_message
from gateway.providers.base import usage_from
from policies.pricing import Usage


@pytest.mark.parametrize(
    "usage",
    [
        {"prompt_tokens": -100, "completion_tokens": 10},
        {"prompt_tokens": 100, "completion_tokens": -10},
        {"prompt_tokens": 100, "completion_tokens": 10, "prompt_tokens_details": {"cached_tokens": -50}},
        {"prompt_tokens": 100, "completion_tokens": 10, "completion_tokens_details": {"reasoning_tokens": -5}},
        {"prompt_tokens": 100, "completion_tokens": 10, "cache_creation_input_tokens": -1},
        {"prompt_tokens": True, "completion_tokens": 10},
        {"prompt_tokens": "100", "completion_tokens": 10},
        {"prompt_tokens": 100, "completion_tokens": "10"},
    ],
)
def test_a_usage_with_a_negative_or_odd_count_is_no_usage(usage: dict[str, Any]) -> None:
    assert usage_from(usage) is None


def test_an_ordinary_usage_is_read_whole() -> None:
    usage = {"prompt_tokens": 100, "completion_tokens": 10, "prompt_tokens_details": {"cached_tokens": 40}}
    assert usage_from(usage) == Usage(100, 10, 40)


@pytest.mark.parametrize(
    "usage",
    [
        {"input_tokens": -100, "output_tokens": 10},
        {"input_tokens": 100, "output_tokens": -10},
        {"input_tokens": 100, "output_tokens": 10, "cache_read_input_tokens": -90},
        {"input_tokens": 100, "output_tokens": 10, "cache_creation": {"ephemeral_1h_input_tokens": -3}},
    ],
)
def test_a_messages_usage_with_a_negative_count_is_no_usage(usage: dict[str, Any]) -> None:
    assert usage_of_message({"usage": usage}) is None
    assert usage_of_message({"usage": {"input_tokens": 100, "output_tokens": 10}}) == Usage(100, 10)
