"""Where the gateway places prompt-cache breakpoints (policies/prompt_cache.py)."""

from __future__ import annotations

import pytest

from policies.prompt_cache import Block, Section, breakpoints, cache_key, min_cacheable_tokens

T, S, M = Section.TOOLS, Section.SYSTEM, Section.MESSAGES


@pytest.mark.parametrize(
    "blocks, expected",
    [
        # tools, system and a conversation: the stable prefix's end and the conversation's end
        ([Block(T, 300), Block(S, 900), Block(M, 50), Block(M, 50)], (1, 3)),
        # no tools or system: only the conversation's end
        ([Block(M, 800), Block(M, 400)], (1,)),
        # the stable prefix alone is under the minimum: only the end, which is over it
        ([Block(S, 500), Block(M, 600)], (1,)),
        # the whole prompt is under the minimum: nothing
        ([Block(S, 500), Block(M, 100)], ()),
        # the client marked the system prompt: it stays, the end is added
        ([Block(S, 1500, marked=True), Block(M, 100)], (1,)),
        # the client marked a later system block: the stable prefix is marked already
        ([Block(T, 1200), Block(S, 100, marked=True), Block(M, 100)], (2,)),
        # three client marks leave one place: the conversation's end
        ([Block(T, 2000, True), Block(T, 10, True), Block(S, 10, True), Block(S, 10), Block(M, 10)], (4,)),
        # four client marks: none added
        ([Block(T, 2000, True), Block(T, 10, True), Block(S, 10, True), Block(M, 10, True), Block(M, 10)], ()),
        ([], ()),
    ],
)
def test_breakpoints(blocks: list[Block], expected: tuple[int, ...]) -> None:
    assert breakpoints(blocks, min_tokens=1024) == expected


@pytest.mark.parametrize(
    "model, tokens",
    [
        ("claude-sonnet-4-5", 1024),
        ("anthropic/claude-haiku-4-5-20251001", 4096),
        ("claude-opus-4.5", 4096),
        ("claude-3-5-haiku-20241022", 2048),
        ("bedrock/anthropic.claude-3-haiku", 2048),
        ("claude-opus-4-1", 1024),
    ],
)
def test_minimum_cacheable_length(model: str, tokens: int) -> None:
    assert min_cacheable_tokens(model) == tokens


def test_cache_key_is_per_scope_and_prefix() -> None:
    assert cache_key("team_a", b"p") == cache_key("team_a", b"p")
    assert cache_key("team_a", b"p") != cache_key("team_b", b"p")
    assert cache_key("team_a", b"p") != cache_key("team_a", b"q")
