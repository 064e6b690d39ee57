"""Upstreams that serve the Responses API themselves: the client's body goes through nearly
untouched, and only the usage is read back, for pricing.

Rewritten on the way up:
- `model`: the deployment's own name for it.
- the conversation: costgate keeps stored responses itself (a chain may hop between
  deployments, as a cascade's tiers do), so when it has resolved `previous_response_id` the
  earlier items are sent as input instead and `store` is false upstream. Without the
  upstream's store a reasoning item can only be sent back with its encrypted content: for a
  reasoning model the caller asks for it (`encrypted_reasoning`; other models refuse the
  `include` with a 400), and earlier reasoning items without it are left out, since the
  upstream would answer 404 for them.

Read on the way down: `usage` of a Response, or of the Response in a stream's terminal event
(response.completed, response.incomplete or response.failed).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from policies.pricing import Usage

TERMINAL_EVENTS = frozenset({"response.completed", "response.incomplete", "response.failed"})
ENCRYPTED_REASONING = "reasoning.encrypted_content"


class _Read(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class _InputDetails(_Read):
    cached_tokens: int = 0


class ResponsesUsage(_Read):
    input_tokens: int
    output_tokens: int = 0
    input_tokens_details: _InputDetails | None = None


def native_body(body: dict[str, Any], upstream_model: str, history: Sequence[dict[str, Any]] | None = None,
                encrypted_reasoning: bool = False) -> dict[str, Any]:
    """The body for a native upstream; `history` is the conversation costgate resolved, if any."""
    out = dict(body, model=upstream_model, store=False)
    if history is not None:
        current = body.get("input")
        items = [{"role": "user", "content": current}] if isinstance(current, str) else list(current or ())
        out["input"] = [item for item in history if _resendable(item)] + items
        out.pop("previous_response_id", None)
    include = list(out.get("include") or ())
    if encrypted_reasoning and ENCRYPTED_REASONING not in include:
        out["include"] = [*include, ENCRYPTED_REASONING]
    return out


def _resendable(item: dict[str, Any]) -> bool:
    return item.get("type") != "reasoning" or bool(item.get("encrypted_content"))


def usage_of_response(response: Any) -> Usage | None:
    """A Response object's usage, or None when it has none (or it is malformed)."""
    raw = response.get("usage") if isinstance(response, dict) else None
    if not isinstance(raw, dict):
        return None
    try:
        usage = ResponsesUsage.model_validate(raw)
    except ValidationError:
        return None
    cached = usage.input_tokens_details.cached_tokens if usage.input_tokens_details else 0
    return Usage(usage.input_tokens, usage.output_tokens, cached)


def usage_of_event(event: Any) -> Usage | None:
    """The usage a stream event reports: only its terminal event carries one."""
    if not isinstance(event, dict) or event.get("type") not in TERMINAL_EVENTS:
        return None
    return usage_of_response(event.get("response"))
