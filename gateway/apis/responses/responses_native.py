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

from gateway.apis.chat import stands_for
from policies.pricing import Usage

TERMINAL_EVENTS = frozenset({"response.completed", "response.incomplete", "response.failed"})
ENCRYPTED_REASONING = "reasoning.encrypted_content"


class _Read(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class _InputDetails(_Read):
    cached_tokens: int = 0


class _OutputDetails(_Read):
    reasoning_tokens: int = 0


class ResponsesUsage(_Read):
    input_tokens: int
    output_tokens: int = 0
    input_tokens_details: _InputDetails | None = None
    output_tokens_details: _OutputDetails | None = None


def native_body(
    body: dict[str, Any],
    upstream_model: str,
    history: Sequence[dict[str, Any]] | None = None,
    encrypted_reasoning: bool = False,
) -> dict[str, Any]:
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
    reasoning = usage.output_tokens_details.reasoning_tokens if usage.output_tokens_details else 0
    return Usage(usage.input_tokens, usage.output_tokens, cached, reasoning)


def usage_of_event(event: Any) -> Usage | None:
    """The usage a stream event reports: only its terminal event carries one."""
    if not isinstance(event, dict) or event.get("type") not in TERMINAL_EVENTS:
        return None
    return usage_of_response(event.get("response"))


# A relayed stream: which events carry generated text, which are held until the request is
# settled (the terminal one, where the cost is added), and the event a stream cut at its
# budget hold ends with.
TEXT_DELTAS = frozenset({"response.output_text.delta", "response.refusal.delta"})
OTHER_DELTAS = frozenset({"response.function_call_arguments.delta", "response.reasoning_summary_text.delta"})


def event_text(event: dict[str, Any]) -> tuple[str, str]:
    """(answer text, other generated text such as tool arguments) of one stream event."""
    kind, delta = event.get("type"), event.get("delta")
    if not isinstance(delta, str):
        return "", ""
    return (delta, "") if kind in TEXT_DELTAS else ("", delta) if kind in OTHER_DELTAS else ("", "")


def held(event: dict[str, Any]) -> bool:
    return event.get("type") in TERMINAL_EVENTS


def priced(event: dict[str, Any], cost: str) -> dict[str, Any]:
    """The terminal event with the request's cost as `response.usage.cost_usd`."""
    usage = (event.get("response") or {}).get("usage")
    if isinstance(usage, dict):
        usage["cost_usd"] = cost
    return event


def error_event(code: str, message: str) -> dict[str, Any]:
    """The stream's `error` event (the SDKs raise it as an APIError)."""
    return {"type": "error", "code": code, "message": message, "param": None, "sequence_number": 0}


def finish_of(event: dict[str, Any]) -> str | None:
    """The chat `finish_reason` a stream event says the Response ended for (its terminal event)."""
    kind = event.get("type")
    if kind == "response.completed":
        return "stop"
    if kind == "response.incomplete":
        details = (event.get("response") or {}).get("incomplete_details") or {}
        return "length" if details.get("reason") == "max_output_tokens" else "content_filter"
    return None


def generated_text(response: Any) -> str:
    """All a Response's output generated, a field a line (text, refusals, a function call's name
    and arguments, reasoning summaries): what a charge counts when it came without usage."""
    parts: list[Any] = []
    for item in (response.get("output") if isinstance(response, dict) else None) or ():
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "message":
            for part in item.get("content") or ():
                if isinstance(part, dict):
                    parts.append(part.get("text") if part.get("type") == "output_text" else part.get("refusal"))
        elif kind == "function_call":
            parts += [item.get("name"), item.get("arguments")]
        elif kind == "reasoning":
            parts += [s.get("text") for s in item.get("summary") or () if isinstance(s, dict)]
    return "\n".join(p for p in parts if isinstance(p, str) and p)


def chat_answer(response: Any) -> dict[str, Any]:
    """A Response as the Chat Completions answer it stands for (`chat.stands_for`)."""
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    body = response if isinstance(response, dict) else {}
    for item in body.get("output") or ():
        if not isinstance(item, dict):
            continue
        if item.get("type") == "message":
            texts += [
                p["text"]
                for p in item.get("content") or ()
                if isinstance(p, dict) and p.get("type") == "output_text" and isinstance(p.get("text"), str)
            ]
        elif item.get("type") == "function_call":
            calls.append(
                {
                    "id": item.get("call_id"),
                    "type": "function",
                    "function": {"name": item.get("name"), "arguments": item.get("arguments")},
                }
            )
    reason = (body.get("incomplete_details") or {}).get("reason")
    finish = "tool_calls" if calls else "length" if reason == "max_output_tokens" else "stop"
    return stands_for(body, "".join(texts) if texts else None, calls, finish, usage_of_response(body))


class StreamUsage:
    """The usage of a native Responses stream, fed its events in order (the terminal one has it)."""

    def __init__(self) -> None:
        self.usage: Usage | None = None

    def feed(self, event: Any) -> None:
        self.usage = usage_of_event(event) or self.usage

    @property
    def complete(self) -> bool:
        return self.usage is not None  # only the terminal event carries one


def as_asked(event_or_response: dict[str, Any], client_body: dict[str, Any]) -> bool:
    """Put back in an upstream's Response (or a stream event's) what costgate rewrote on the way
    up: the conversation and its storage are costgate's, so the client sees the
    `previous_response_id` and `store` it sent. True when there was a Response to mend."""
    response = event_or_response if event_or_response.get("object") == "response" else event_or_response.get("response")
    if not isinstance(response, dict) or response.get("object") != "response":
        return False
    response["previous_response_id"] = client_body.get("previous_response_id")
    response["store"] = client_body.get("store") is not False
    return True
