"""A chat answer -> a Response object; and the Response envelope the stream shares.

    choices[0].message.content    -> a `message` output item with one `output_text` part
    choices[0].message.refusal    -> a `refusal` part of that message
    choices[0].message.tool_calls -> one `function_call` item each (call_id = the chat call id)
    finish_reason length          -> status `incomplete`, reason max_output_tokens
    finish_reason content_filter  -> status `incomplete`, reason content_filter
    usage                         -> input/output/total tokens, cached and reasoning details

The envelope echoes the request's settings with OpenAI's defaults, as OpenAI's own does.
`output_text` is not sent: the SDKs compute it from `output`.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from gateway.apis.chat import ChatUsage, read_chat
from gateway.apis.responses.responses_request import ResponsesRequest
from gateway.core.errors import UnreadableAnswer

INCOMPLETE = {"length": "max_output_tokens", "content_filter": "content_filter"}


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(24)}"


@dataclass(frozen=True, slots=True)
class ResponseMeta:
    """What a Response carries that the request does not say."""

    id: str  # resp_...
    created_at: int  # unix seconds
    model: str  # the model name the client sees


def incomplete_reason(finish_reason: str | None) -> str | None:
    return INCOMPLETE.get(finish_reason or "")


def output_text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def refusal_part(refusal: str) -> dict[str, Any]:
    return {"type": "refusal", "refusal": refusal}


def message_item(item_id: str, parts: list[dict[str, Any]], status: str) -> dict[str, Any]:
    return {"id": item_id, "type": "message", "status": status, "role": "assistant", "content": parts}


def function_call_item(item_id: str, call_id: str, name: str, arguments: str, status: str) -> dict[str, Any]:
    return {
        "id": item_id,
        "type": "function_call",
        "status": status,
        "arguments": arguments,
        "call_id": call_id,
        "name": name,
    }


def response_usage(usage: ChatUsage) -> dict[str, Any]:
    return {
        "input_tokens": usage.prompt_tokens,
        "input_tokens_details": {"cached_tokens": usage.cached_tokens, "cache_write_tokens": 0},
        "output_tokens": usage.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        "total_tokens": usage.total_tokens,
    }


def _echo_tools(req: ResponsesRequest) -> list[dict[str, Any]]:
    # OpenAI echoes function tools with `parameters` and `strict` always present.
    return [{"parameters": None, "strict": None, **tool} for tool in req.tools or ()]


def envelope(
    req: ResponsesRequest,
    meta: ResponseMeta,
    *,
    status: str,
    output: list[dict[str, Any]],
    usage: dict[str, Any] | None = None,
    incomplete: str | None = None,
    error: dict[str, Any] | None = None,
    service_tier: str | None = None,
) -> dict[str, Any]:
    text = req.text
    return {
        "id": meta.id,
        "object": "response",
        "created_at": meta.created_at,
        "status": status,
        "background": False,
        "error": error,
        "incomplete_details": {"reason": incomplete} if incomplete else None,
        "instructions": req.instructions,
        "max_output_tokens": req.max_output_tokens,
        "max_tool_calls": req.max_tool_calls,
        "model": meta.model,
        "output": output,
        "parallel_tool_calls": req.parallel_tool_calls is not False,
        "previous_response_id": req.previous_response_id,
        "prompt_cache_key": req.prompt_cache_key,
        "reasoning": {"effort": req.reasoning.effort if req.reasoning else None, "summary": None},
        "safety_identifier": req.safety_identifier,
        "service_tier": service_tier or "default",
        "store": req.stores,
        "temperature": 1.0 if req.temperature is None else req.temperature,
        "text": {
            "format": (text.format if text else None) or {"type": "text"},
            "verbosity": (text.verbosity if text else None) or "medium",
        },
        "tool_choice": req.tool_choice or "auto",
        "tools": _echo_tools(req),
        "top_logprobs": 0,
        "top_p": 1.0 if req.top_p is None else req.top_p,
        "truncation": "disabled",
        "usage": usage,
        "user": req.user,
        "metadata": req.metadata or {},
    }


def to_response(chat: Any, req: ResponsesRequest, meta: ResponseMeta) -> dict[str, Any]:
    """The Response for a whole chat answer."""
    answer = read_chat(chat)
    choice = answer.choice
    if choice is None:
        raise UnreadableAnswer("upstream answered with no choices")
    incomplete = incomplete_reason(choice.finish_reason)
    status = "incomplete" if incomplete else "completed"
    message = choice.message
    output: list[dict[str, Any]] = []
    parts = ([output_text_part(message.content)] if message.content else []) + (
        [refusal_part(message.refusal)] if message.refusal else []
    )
    if parts:
        output.append(message_item(new_id("msg"), parts, status))
    for call in message.tool_calls or ():
        output.append(
            function_call_item(
                new_id("fc"),
                call.id or new_id("call"),
                call.function.name or "",
                call.function.arguments or "",
                "completed",
            )
        )
    return envelope(
        req,
        meta,
        status=status,
        output=output,
        incomplete=incomplete,
        usage=response_usage(answer.usage) if answer.usage else None,
        service_tier=answer.service_tier,
    )
