"""The parameters of `POST /v1/responses`, typed.

A parameter either translates to Chat Completions, or is echoed back and needs nothing
upstream, or is refused with a 400 that names it: nothing is dropped silently. Unknown
parameters are refused too, as OpenAI refuses them. Input items and tools are checked one by
one in items.py and to_chat.py, where their translation lives.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from gateway.apis.parsing import (
    MODEL_NAME,
    Refusals,
    check_refusals,
    missing,
    unset,
    unsupported,
    validate,
)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TextConfig(_Strict):
    format: dict[str, Any] | None = None  # text | json_schema | json_object: to_chat.py
    verbosity: Literal["low", "medium", "high"] | None = None


class Reasoning(_Strict):
    effort: str | None = None
    summary: str | None = None
    generate_summary: str | None = None  # the deprecated name of `summary`
    context: str | None = None
    mode: str | None = None


class StreamOptions(_Strict):
    include_obfuscation: bool | None = None  # costgate adds no obfuscation padding either way


class ResponsesRequest(_Strict):
    model: str = Field(min_length=1, max_length=256, pattern=MODEL_NAME)
    input: str | list[dict[str, Any]] | None = None
    instructions: str | None = None
    previous_response_id: str | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    max_tool_calls: int | None = Field(default=None, ge=1)  # counts built-in tool calls: none here
    text: TextConfig | None = None
    reasoning: Reasoning | None = None
    max_output_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    user: str | None = Field(default=None, max_length=256)
    metadata: dict[str, str] | None = None
    store: bool | None = None
    stream: bool | None = None
    stream_options: StreamOptions | None = None
    truncation: Literal["auto", "disabled"] | None = None
    prompt_cache_key: str | None = None
    prompt_cache_retention: str | None = None
    safety_identifier: str | None = None
    service_tier: str | None = None
    # Refused unless absent or neutral: REFUSED below says why.
    background: Any = None
    conversation: Any = None
    prompt: Any = None
    include: Any = None
    top_logprobs: Any = None
    context_management: Any = None
    moderation: Any = None
    image: Any = None
    access_programs: Any = None
    background_options: Any = None
    prompt_cache_options: Any = None

    @property
    def stores(self) -> bool:
        """Whether costgate keeps this response for `previous_response_id` and GET (default: yes)."""
        return self.store is not False


REFUSED: Refusals = {
    "background": (unset, "background responses are not supported; send the request and wait, or stream it"),
    "conversation": (unset, "the Conversations API is not served; use previous_response_id"),
    "prompt": (unset, "stored prompt templates live at OpenAI; send the prompt as input"),
    "include": (
        unset,
        ("the extra outputs it asks for (logprobs, encrypted reasoning, tool results) are not produced"),
    ),
    "top_logprobs": (unset, "log probabilities are not returned by the Responses translation"),
    "context_management": (unset, "server-side context compaction is not supported"),
    "moderation": (unset, "moderation runs at OpenAI only"),
    "image": (unset, "image generation settings have no Chat Completions equivalent"),
    "access_programs": (unset, "OpenAI access programs do not apply through costgate"),
    "background_options": (unset, "background responses are not supported"),
    "prompt_cache_options": (unset, "explicit prompt-cache breakpoints have no Chat Completions equivalent"),
    "truncation": (
        lambda v: v in (None, "disabled"),
        "'auto' truncation is not supported; a conversation over the context window fails",
    ),
}


def parse_request(body: Any) -> ResponsesRequest:
    req = validate(ResponsesRequest, body)
    check_refusals(req, REFUSED)
    if req.input is None and req.previous_response_id is None:
        raise missing("input")
    reasoning = req.reasoning
    if reasoning is not None:
        for name in ("summary", "generate_summary", "context", "mode"):
            if getattr(reasoning, name) is not None:
                raise unsupported(
                    f"reasoning.{name}",
                    "Chat Completions upstreams return no reasoning summaries; only reasoning.effort is translated",
                )
    return req
