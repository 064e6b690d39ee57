"""Scorers: how confident is the cascade that a tier's answer is good enough to return?

Every scorer implements one small protocol (`Scorer`): given the request and one tier's
answer (`Scored`), return a confidence in [0, 1]. The cascade accepts the answer when the
confidence reaches the tier's threshold, and otherwise asks the next tier.

    rules      policies/scorers/rules.py    1.0 unless a rule check fails (always applied first)
    logprob    policies/scorers/logprob.py  the answer's mean token probability (asks for logprobs)
    learned    policies/scorers/learned.py  a small logistic regression on (query, answer) features
    judge      policies/scorers/judge.py    a cheap model asked to grade the answer (a real, charged call)

The rule checks (empty, refusal, truncated, invalid JSON when JSON was demanded) gate every
scorer: an answer that fails one scores 0 whatever the scorer says.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Protocol

from gateway.context import RequestContext


@dataclass(frozen=True, slots=True)
class Scored:
    """One tier's answer, reduced to what scorers read."""

    query: str  # the request's text (the last user turn, or the prompt)
    answer: str
    finish_reason: str | None = None
    logprobs: tuple[float, ...] | None = None  # per generated token, when the upstream sent them
    wants_json: bool = False  # response_format demanded a JSON object
    has_tool_calls: bool = False

    @classmethod
    def from_bodies(cls, request: dict[str, Any], answer: dict[str, Any]) -> Scored:
        choices = answer.get("choices") or [{}]
        choice = choices[0] if isinstance(choices[0], dict) else {}
        message = choice.get("message") if isinstance(choice.get("message"), dict) else {}
        text = message.get("content") if message else choice.get("text")
        fmt = request.get("response_format")
        return cls(query=query_text(request), answer=text if isinstance(text, str) else "",
                   finish_reason=choice.get("finish_reason"), logprobs=token_logprobs(choice.get("logprobs")),
                   wants_json=isinstance(fmt, dict) and fmt.get("type") in ("json_object", "json_schema"),
                   has_tool_calls=bool(message.get("tool_calls")) if message else False)


def query_text(body: dict[str, Any]) -> str:
    """The text a scorer judges the answer against: the last user message, else the prompt."""
    for message in reversed(body.get("messages") or ()):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    prompt = body.get("prompt")
    return prompt if isinstance(prompt, str) else ""


def token_logprobs(logprobs: Any) -> tuple[float, ...] | None:
    """OpenAI's chat (`content: [{logprob}]`) or completions (`token_logprobs: []`) shape."""
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


class Scorer(Protocol):
    needs_logprobs: bool  # the cascade asks the tier for logprobs when set

    async def score(self, ctx: RequestContext, item: Scored) -> float:
        """Confidence in [0, 1] that `item.answer` is good enough (may charge `ctx`)."""
        ...

    def worst_case_cost(self, ctx: RequestContext) -> Decimal:
        """The most one `score` call can charge (a judge model's call; 0 for the others)."""
        ...
