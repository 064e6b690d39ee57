"""Where a provider's prompt cache should be asked to keep a prefix: pure decisions.

Anthropic caches a prompt's prefix only where a request marks a block with `cache_control` (a
breakpoint), at most four a request, and only when the prefix up to it is at least the model's
minimum cacheable length; a later request reads the longest cached prefix ending at one of its
own breakpoints or at one of the 20 blocks before each. Reads cost 10% of input, writes 125%
(5-minute TTL) or 200% (1 hour). So on agent traffic, which resends the same tools, system
prompt and history every turn, two breakpoints pay for themselves from the second turn on:

1. the end of the stable prefix (the last tool, or the system prompt after it): shared by every
   conversation with the same tools and instructions;
2. the end of the conversation so far (the last block): the next turn reads it back, since it
   ends within 20 blocks of that turn's own last block.

A breakpoint the client set is never moved and counts toward the four; a candidate already
marked, or shorter than the minimum, is skipped.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

MAX_BREAKPOINTS = 4
DEFAULT_MIN_TOKENS = 1024
# Anthropic's minimum cacheable prompt length by model (docs: "Prompt caching", "Cache
# limitations"), matched on the model name; anything else Claude: 1024. A model's config
# `prompt_cache.min_tokens` overrides it.
MIN_TOKENS: tuple[tuple[str, int], ...] = (
    ("opus-4-6", 4096),
    ("opus-4-5", 4096),
    ("haiku-4-5", 4096),
    ("haiku-3-5", 2048),
    ("3-5-haiku", 2048),
    ("haiku-3", 2048),
    ("3-haiku", 2048),
)


class Section(StrEnum):
    TOOLS = "tools"
    SYSTEM = "system"
    MESSAGES = "messages"


@dataclass(frozen=True, slots=True)
class Block:
    """One cacheable block of a prompt, in the provider's cache order (tools, system, messages)."""

    section: Section
    tokens: int
    marked: bool = False  # the client set a breakpoint here


def min_cacheable_tokens(model: str) -> int:
    name = model.lower().replace(".", "-")
    return next((tokens for part, tokens in MIN_TOKENS if part in name), DEFAULT_MIN_TOKENS)


def breakpoints(blocks: Sequence[Block], min_tokens: int, limit: int = MAX_BREAKPOINTS) -> tuple[int, ...]:
    """The indexes of the blocks where the gateway adds a breakpoint, in prompt order."""
    free = limit - sum(b.marked for b in blocks)
    if free <= 0 or not blocks:
        return ()
    ends, total = [], 0
    for block in blocks:
        total += block.tokens
        ends.append(total)
    stable = max((i for i, b in enumerate(blocks) if b.section is not Section.MESSAGES), default=None)
    # The conversation's end first: it also holds the stable prefix for the next turn of the
    # same conversation, which is where agent traffic repeats itself.
    valid = [
        i
        for i in dict.fromkeys((len(blocks) - 1, stable))
        if i is not None and not blocks[i].marked and ends[i] >= min_tokens and not _marked_at_end(blocks, i)
    ]
    return tuple(sorted(valid[:free]))


def _marked_at_end(blocks: Sequence[Block], index: int) -> bool:
    """The client already marks the stable prefix (a later tool or system block is marked)."""
    return blocks[index].section is not Section.MESSAGES and any(
        b.marked for b in blocks[index:] if b.section is not Section.MESSAGES
    )


def cache_key(scope: str, stable_prefix: bytes) -> str:
    """OpenAI's `prompt_cache_key`: requests with the same key and prefix go to the same cache
    (OpenAI routes by it); the scope is the team, unless teams share provider cache entries."""
    return "cg-" + hashlib.sha256(scope.encode() + b"\0" + stable_prefix).hexdigest()[:32]


def scope_salt(team_id: str) -> str:
    """A short text that makes a team's prompt prefixes its own at a provider whose cache is
    shared by every caller of one API key (Anthropic's organization): see docs/caching.md."""
    return "cache scope " + hashlib.sha256(b"costgate-team\0" + team_id.encode()).hexdigest()[:16]
