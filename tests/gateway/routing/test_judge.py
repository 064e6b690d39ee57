"""The judge scorer's grade parsing (gateway/routing/judge.py)."""

from __future__ import annotations

import pytest

from gateway.routing.judge import parse_grade


@pytest.mark.parametrize(
    "text, expected",
    [
        ("8", 0.8),
        ("10", 1.0),
        ("Grade: 3/10", 0.3),
        ("none", None),
        ("0", 0.0),
    ],
)
def test_parse_grade(text: str, expected: float | None) -> None:
    assert parse_grade(text) == expected
