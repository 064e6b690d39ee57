"""Distillation examples (issue 13, item 6): a cascade's last-tier answers as OpenAI chat
fine-tuning examples, deduplicated and split into train and held-back sets. Pure: the rows come
from gateway/storage/distill_texts.py, the files are written by gateway/commands/distill_cli.py.

An example is `{"messages": [...]}`: the request's messages (system, user and assistant turns
with string content; a `developer` message counts as `system`) and, last, the assistant turn
the last tier answered. A request whose messages cannot be written that way (tool calls or
tool results, images or audio, an empty answer) is skipped and counted.

Two requests are the same example when their prompt messages are the same after normalizing
(roles, and each content with runs of whitespace made one space and the ends stripped); the
latest answer is kept. Which set an example falls in is decided by a hash of that normalized
prompt, so the split is the same on every export and the same prompt never lands in both.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

ROLES = ("system", "user", "assistant")  # the roles an example's prompt may use, tools aside
_ROLE_ALIASES = {"developer": "system"}  # the Responses-era name for the system message


@dataclass(frozen=True, slots=True)
class StoredText:
    """One kept request: its messages as the client sent them and the last tier's answer."""

    messages: Any  # the request body's `messages`, unchecked
    answer: str


@dataclass(frozen=True, slots=True)
class Example:
    key: str  # hex digest of the normalized prompt
    messages: tuple[dict[str, str], ...]  # ending with the assistant's answer

    def line(self) -> dict[str, Any]:
        return {"messages": [dict(m) for m in self.messages]}


@dataclass(frozen=True, slots=True)
class Export:
    train: list[Example]
    held_back: list[Example]
    rows: int  # rows read
    skipped: int  # rows that could not be written as a chat fine-tuning example
    duplicates: int  # rows whose prompt an earlier or later row had


def _content(value: Any) -> str | None:
    """A message's content as one string: a string, or a list of text parts; None otherwise."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value:
        parts = []
        for part in value:
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                return None  # an image, audio, a file: not a text example
            parts.append(part["text"])
        return "".join(parts)
    return None


def prompt_messages(messages: Any) -> list[dict[str, str]] | None:
    """The request's messages in the fine-tuning format, or None when they cannot be."""
    if not isinstance(messages, list) or not messages:
        return None
    out = []
    for message in messages:
        if not isinstance(message, dict) or message.get("tool_calls") or message.get("function_call"):
            return None
        role = message.get("role")
        role = _ROLE_ALIASES.get(role, role) if isinstance(role, str) else None
        content = _content(message.get("content"))
        if role not in ROLES or content is None:
            return None
        out.append({"role": role, "content": content})
    if not any(m["role"] == "user" for m in out):
        return None
    return out


def normalized(text: str) -> str:
    return " ".join(text.split())


def prompt_key(prompt: Sequence[dict[str, str]]) -> str:
    canonical = json.dumps([[m["role"], normalized(m["content"])] for m in prompt], ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def example_of(row: StoredText) -> Example | None:
    prompt = prompt_messages(row.messages)
    if prompt is None or not row.answer.strip():
        return None
    return Example(prompt_key(prompt), (*prompt, {"role": "assistant", "content": row.answer}))


def held_back(key: str, share: float) -> bool:
    """Whether the example with this prompt key is in the held-back set (about `share` of them)."""
    return int(key[:16], 16) / 2**64 < share


def build_export(rows: Iterable[StoredText], holdout: float) -> Export:
    """Rows oldest first -> deduplicated examples (in order of first appearance), split."""
    if not 0.0 <= holdout < 1.0:
        raise ValueError(f"holdout must be in [0, 1), got {holdout}")
    kept: dict[str, Example] = {}
    read = skipped = duplicates = 0
    for row in rows:
        read += 1
        example = example_of(row)
        if example is None:
            skipped += 1
            continue
        if example.key in kept:
            duplicates += 1
        kept[example.key] = example  # the latest answer, at the first one's place
    train: list[Example] = []
    back: list[Example] = []
    for example in kept.values():
        (back if held_back(example.key, holdout) else train).append(example)
    return Export(train, back, read, skipped, duplicates)


def fine_tuning_problem(line: Any) -> str | None:
    """Why `line` is not a valid chat fine-tuning example in OpenAI's format (None: it is):
    an object with one key, `messages`, a list of objects each with a known role and string
    content (and no other keys), at least one user turn, and an assistant turn last."""
    if not isinstance(line, dict) or set(line) != {"messages"}:
        return "not an object with exactly the key `messages`"
    messages = line["messages"]
    if not isinstance(messages, list) or len(messages) < 2:
        return "`messages` is not a list of at least two messages"
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or set(m) != {"role", "content"}:
            return f"message {i} is not an object with exactly `role` and `content`"
        if m["role"] not in ROLES:
            return f"message {i} has role {m['role']!r}"
        if not isinstance(m["content"], str):
            return f"message {i}'s content is not a string"
    if not any(m["role"] == "user" for m in messages):
        return "no user message"
    if messages[-1]["role"] != "assistant" or not messages[-1]["content"].strip():
        return "the last message is not a non-empty assistant answer"
    return None
