"""Reading OpenAI request and answer bodies: the one place that knows where a question's and an
answer's text sit in Chat Completions and legacy Completions shapes.

Pure functions over parsed JSON. Everything that needs "the answer's text" (scoring a cascade
tier, a judge's grade, a summary, a cache entry) calls `answer_text`; charging an answer whose
upstream reported no usage counts `generated_text`, which holds tool calls and reasoning too;
every reader of "the question" calls `query_text`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any


def content_text(content: Any) -> str:
    """A message's `content` as text: the string, or its text parts joined (images have none)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and "text" in p)
    return ""


def first_choice(body: dict[str, Any]) -> dict[str, Any]:
    choices = body.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        return choices[0]
    return {}


def answer_text(body: dict[str, Any]) -> str:
    """The answer's text: the first choice's chat `message.content` or completions `text`."""
    choice = first_choice(body)
    message = choice.get("message")
    text = message.get("content") if isinstance(message, dict) else choice.get("text")
    return text if isinstance(text, str) else ""


NOT_GENERATED = frozenset({"role", "id", "type"})  # keys whose strings the upstream did not generate


Field = tuple[Any, ...]  # where a generated string sits: (0, "delta", "tool_calls", 1, "function", "arguments")


def generated_fields(value: Any, field: Field = ()) -> Iterator[tuple[Field, str]]:
    """Every string in `value` (a choice, a message, a delta) but under NOT_GENERATED keys, with
    its field: content, refusal, reasoning, tool calls' names and arguments, whatever a provider
    adds. A list item is placed by its own `index` where it has one (a stream's tool-call deltas)."""
    if isinstance(value, str):
        yield field, value
    elif isinstance(value, dict):
        for key, item in value.items():
            if key not in NOT_GENERATED:
                yield from generated_fields(item, (*field, key))
    elif isinstance(value, list):
        for position, item in enumerate(value):
            index = item.get("index", position) if isinstance(item, dict) else position
            yield from generated_fields(item, (*field, index))


def choice_fields(choices: Any) -> Iterator[tuple[Field, str]]:
    """The generated strings of an answer's or a chunk's choices (chat `message` or `delta`,
    completions `text`), each choice by its index."""
    for position, choice in enumerate(choices if isinstance(choices, list) else ()):
        if isinstance(choice, dict):
            index = choice.get("index", position)
            for key in ("message", "delta", "text"):
                if key in choice:
                    yield from generated_fields(choice[key], (index, key))


def add_generated(parts: list[str], pieces: Iterable[tuple[Field, str]], last: Field | None) -> Field | None:
    """Append `pieces` to `parts`, a newline between two fields, so that no token is counted
    across two (each field is a sequence of its own to the provider; the newline may count one
    token more a field: the count errs up). A stream's pieces of one field join as they came.
    Returns the last piece's field, for the next call."""
    for field, text in pieces:
        if field != last and parts:
            parts.append("\n")
        parts.append(text)
        last = field
    return last


def generated_text(body: dict[str, Any]) -> str:
    """All the output a whole answer's choices carry: what its provider billed as completion
    tokens, as a charge without usage counts it."""
    parts: list[str] = []
    add_generated(parts, choice_fields(body.get("choices")), None)
    return "".join(parts)


def query_text(body: dict[str, Any]) -> str:
    """The request's question: the last user message's text, else a string prompt."""
    for message in reversed(body.get("messages") or ()):
        if isinstance(message, dict) and message.get("role") == "user":
            return content_text(message.get("content"))
    prompt = body.get("prompt")
    return prompt if isinstance(prompt, str) else ""


def token_logprobs(logprobs: Any) -> tuple[float, ...] | None:
    """Per-token logprobs in OpenAI's chat (`content: [{logprob}]`) or completions
    (`token_logprobs: []`) shape; None when there are none."""
    if not isinstance(logprobs, dict):
        return None
    if isinstance(logprobs.get("content"), list):
        values = [t.get("logprob") for t in logprobs["content"] if isinstance(t, dict)]
    elif isinstance(logprobs.get("token_logprobs"), list):
        values = logprobs["token_logprobs"]
    else:
        return None
    found = tuple(float(v) for v in values if isinstance(v, int | float))
    return found or None
