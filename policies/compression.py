"""Context compression: keep a long conversation inside a token budget.

When a chat's prompt passes `budget_tokens`, the leading system messages and the most recent
`keep_recent` messages stay verbatim; the turns between are replaced by one system message
holding a compact summary — written by the cheapest model when a `summarizer` is configured,
else extractive (the first sentence of each dropped turn, newest first, as many as fit).
This is the prompt-level version of a windowed KV cache: the model keeps full attention on
the recent window and a sketch of the rest. Pure functions here; the stage is
gateway/stages/compress.py.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

Message = dict[str, Any]
HEAD_ROLES = ("system", "developer")
SENTENCE = re.compile(r"(?<=[.!?])\s+")
SUMMARY_PREFIX = "Summary of the earlier conversation (older turns were compressed):\n"
MAX_WORDS_PER_TURN = 40


@dataclass(frozen=True, slots=True)
class Split:
    """A conversation cut in three: what stays at the head, what is summarized, what stays last."""

    head: list[Message]  # leading system/developer messages, kept
    older: list[Message]  # replaced by a summary
    recent: list[Message]  # kept verbatim


def text_of(message: Message) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def split(
    messages: Sequence[Message], budget_tokens: int, keep_recent: int, count: Callable[[Sequence[Message]], int]
) -> Split | None:
    """What to keep and what to summarize; None when the prompt fits or nothing can go."""
    if count(messages) <= budget_tokens:
        return None
    cut = 0
    while cut < len(messages) and messages[cut].get("role") in HEAD_ROLES:
        cut += 1
    head, rest = list(messages[:cut]), list(messages[cut:])
    start = max(0, len(rest) - keep_recent)
    # A tool result must stay with the assistant message that called the tool.
    while start > 0 and rest[start].get("role") == "tool":
        start -= 1
    if start == 0:
        return None
    return Split(head, rest[:start], rest[start:])


def extractive_summary(older: Sequence[Message], max_tokens: int, count_text: Callable[[str], int]) -> str:
    """One line per dropped turn (role: first sentence, clipped), newest kept when space runs out."""
    lines: list[str] = []
    used = 0
    for message in reversed(older):
        text = " ".join(text_of(message).split())
        if not text:
            continue
        first = SENTENCE.split(text, maxsplit=1)[0]
        words = first.split()
        line = (
            f"- {message.get('role', 'user')}: "
            + " ".join(words[:MAX_WORDS_PER_TURN])
            + (" ..." if len(words) > MAX_WORDS_PER_TURN else "")
        )
        cost = count_text(line) + 1
        if used + cost > max_tokens:
            break
        lines.append(line)
        used += cost
    return "\n".join(reversed(lines))


def summary_request(older: Sequence[Message], max_tokens: int) -> list[Message]:
    transcript = "\n".join(f"{m.get('role', 'user')}: {text_of(m)}" for m in older if text_of(m))
    return [
        {
            "role": "system",
            "content": f"Summarize this conversation in at most {max_tokens} tokens. "
            "Keep names, numbers, decisions and open questions.",
        },
        {"role": "user", "content": transcript},
    ]


def compressed(p: Split, summary: str) -> list[Message]:
    return [*p.head, {"role": "system", "content": SUMMARY_PREFIX + summary}, *p.recent]
