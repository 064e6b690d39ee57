"""A chat answer -> an Anthropic Message; the stop reasons and usage the stream shares.

content (and a refusal's text)  -> a text block
tool_calls                      -> tool_use blocks (id = the chat call id, input parsed)
finish_reason stop              -> end_turn, or stop_sequence when the upstream names the
                                   stop string that ended it (vLLM's `stop_reason`): an
                                   OpenAI upstream does not say, so it reads end_turn
finish_reason length            -> max_tokens
finish_reason tool_calls        -> tool_use
finish_reason content_filter, or a refusal -> refusal
usage                           -> input_tokens (the uncached part, as Anthropic counts),
                                   cache_read_input_tokens, output_tokens
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

import orjson

from gateway.apis.chat import ChatUsage, Choice, read_chat
from gateway.core.errors import UnreadableAnswer

STOP_REASONS = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "refusal",
}


def new_message_id() -> str:
    return "msg_" + secrets.token_hex(12)


def new_tool_use_id() -> str:
    """For an upstream tool call that came without an id: a tool_use block must have one."""
    return "toolu_" + secrets.token_hex(12)


@dataclass(frozen=True, slots=True)
class MessageMeta:
    id: str  # msg_...
    model: str  # the model name the client sees
    stop_sequences: tuple[str, ...] = ()  # the request's, to recognise the one that ended the answer


def stop_reason(choice: Choice, meta: MessageMeta, refused: bool) -> tuple[str, str | None]:
    """(stop_reason, stop_sequence)."""
    if refused:
        return "refusal", None
    matched = choice.stop_reason
    if choice.finish_reason == "stop" and isinstance(matched, str) and matched in meta.stop_sequences:
        return "stop_sequence", matched
    return STOP_REASONS.get(choice.finish_reason or "stop", "end_turn"), None


def message_usage(usage: ChatUsage | None) -> dict[str, Any]:
    prompt, cached = (usage.prompt_tokens, usage.cached_tokens) if usage else (0, 0)
    return {
        "input_tokens": prompt - cached,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": cached,
        "output_tokens": usage.completion_tokens if usage else 0,
    }


def tool_input(arguments: str | None) -> dict[str, Any]:
    """A chat call's arguments as a tool_use input: Anthropic's input is always an object."""
    try:
        value = orjson.loads(arguments or "{}")
    except orjson.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        raise UnreadableAnswer("the model's tool call arguments are not a JSON object")
    return value


def to_message(chat: Any, meta: MessageMeta) -> dict[str, Any]:
    answer = read_chat(chat)
    choice = answer.choice
    if choice is None:
        raise UnreadableAnswer("upstream answered with no choices")
    message = choice.message
    text = (message.content or "") + (message.refusal or "")
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    for call in message.tool_calls or ():
        content.append(
            {
                "type": "tool_use",
                "id": call.id or new_tool_use_id(),
                "name": call.function.name or "",
                "input": tool_input(call.function.arguments),
            }
        )
    reason, sequence = stop_reason(choice, meta, bool(message.refusal))
    return {
        "id": meta.id,
        "type": "message",
        "role": "assistant",
        "model": meta.model,
        "content": content,
        "stop_reason": reason,
        "stop_sequence": sequence,
        "usage": message_usage(answer.usage),
    }
