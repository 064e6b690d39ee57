"""One typed view of what the gateway reads in a request body: the output it asks for, how many
completions it makes, whether it wants a usage chunk, its question. Read from the body in one
place, so the budget's worst case, the replica admission weight, the cost router and the
stream tail all agree on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gateway.core.bodies import query_text


def asked_output_tokens(body: dict[str, Any]) -> int | None:
    """The client's cap on one completion's output (`max_completion_tokens`, else `max_tokens`)."""
    asked = body.get("max_completion_tokens") or body.get("max_tokens")
    return asked if isinstance(asked, int) and not isinstance(asked, bool) and asked > 0 else None


def completion_count(body: dict[str, Any]) -> int:
    """How many completions a provider generates and bills: one per prompt of a list (legacy
    completions), times `n`, times `best_of` (its candidates are billed though not returned)."""
    n, best_of = body.get("n"), body.get("best_of")
    count = (n if isinstance(n, int) and n > 0 else 1) * (best_of if isinstance(best_of, int) and best_of > 0 else 1)
    prompt = body.get("prompt")
    if isinstance(prompt, list) and prompt and not isinstance(prompt[0], int):
        count *= len(prompt)  # a list of strings or of token arrays: one completion each
    return count


def wants_usage_chunk(body: dict[str, Any]) -> bool:
    """Whether a streamed answer ends with OpenAI's usage chunk (`stream_options.include_usage`)."""
    options = body.get("stream_options")
    return isinstance(options, dict) and bool(options.get("include_usage"))


@dataclass(frozen=True, slots=True)
class RequestView:
    model: str
    stream: bool
    max_output_tokens: int | None  # per completion; None: the model's own cap applies
    completions: int  # billed completions: prompts x n x best_of
    include_usage: bool
    question: str  # the last user message's text, or a string prompt

    @classmethod
    def of(cls, body: dict[str, Any]) -> RequestView:
        model = body.get("model")
        return cls(
            model if isinstance(model, str) else "",
            bool(body.get("stream")),
            asked_output_tokens(body),
            completion_count(body),
            wants_usage_chunk(body),
            query_text(body),
        )
