"""Chat Completions answers and streams shaped as OpenAI sends them, for the translators' tests.

A stream follows OpenAI's chunk order: a first chunk with the role, the content in pieces,
each tool call as a first delta (id, name, empty arguments) then argument fragments, a chunk
with finish_reason and an empty delta, and, with include_usage, a last chunk with no choices
and the usage.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

CREATED = 1_754_925_861


@dataclass(frozen=True)
class Call:
    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Answer:
    text: str | None = None
    calls: tuple[Call, ...] = ()
    finish_reason: str = "stop"
    prompt_tokens: int = 12
    completion_tokens: int = 7
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    refusal: str | None = None
    extra_choice: dict[str, Any] = field(default_factory=dict)  # vendor fields, e.g. vLLM's stop_reason

    def usage(self) -> dict[str, Any]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": self.cached_tokens, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": self.reasoning_tokens,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        }


def completion(answer: Answer, model: str = "gpt-4o-mini-2024-07-18") -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": answer.text,
        "refusal": answer.refusal,
        "annotations": [],
    }
    if answer.calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in answer.calls
        ]
    return {
        "id": "chatcmpl-abc",
        "object": "chat.completion",
        "created": CREATED,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": answer.finish_reason,
                **answer.extra_choice,
            }
        ],
        "usage": answer.usage(),
        "service_tier": "default",
        "system_fingerprint": "fp_1",
    }


def _chunk(
    delta: dict[str, Any] | None, finish: str | None = None, model: str = "gpt-4o-mini", **extra: Any
) -> dict[str, Any]:
    choices = (
        [] if delta is None else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish, **extra}]
    )
    return {
        "id": "chatcmpl-abc",
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": model,
        "service_tier": "default",
        "system_fingerprint": "fp_1",
        "choices": choices,
        "usage": None,
    }


def pieces(text: str, size: int = 3) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def chunks(answer: Answer, with_usage: bool = True) -> list[dict[str, Any]]:
    out = [_chunk({"role": "assistant", "content": "", "refusal": None})]
    out += [_chunk({"content": p}) for p in pieces(answer.text or "")]
    out += [_chunk({"refusal": p}) for p in pieces(answer.refusal or "")]
    for i, call in enumerate(answer.calls):
        out.append(
            _chunk(
                {
                    "tool_calls": [
                        {
                            "index": i,
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": ""},
                        }
                    ]
                }
            )
        )
        out += [_chunk({"tool_calls": [{"index": i, "function": {"arguments": p}}]}) for p in pieces(call.arguments)]
    out.append(_chunk({}, answer.finish_reason, **answer.extra_choice))
    if with_usage:
        out.append(_chunk(None) | {"usage": answer.usage()})
    return out
