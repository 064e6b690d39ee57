"""Reading OpenAI request and answer bodies: the one place that knows where a question's and an
answer's text sit in Chat Completions and legacy Completions shapes.

Pure functions over parsed JSON. Everything that needs "the answer's text" (charging an answer
without usage, scoring a cascade tier, a judge's grade, a summary) calls `answer_text`; every
reader of "the question" calls `query_text`.
"""

from __future__ import annotations

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


def answer_text(body: dict[str, Any], *, all_choices: bool = False) -> str:
    """The answer's text: the first choice's chat `message.content` or completions `text`
    (with `all_choices`, every choice's, concatenated: what a charge counts)."""
    choices = body.get("choices") if all_choices else [first_choice(body)]
    parts = []
    for choice in choices if isinstance(choices, list) else ():
        if not isinstance(choice, dict):
            continue
        message = choice.get("message")
        text = message.get("content") if isinstance(message, dict) else choice.get("text")
        if isinstance(text, str):
            parts.append(text)
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
