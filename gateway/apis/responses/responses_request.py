"""The parameters of `POST /v1/responses`, typed.

A parameter either translates to Chat Completions, or is echoed back and needs nothing
upstream, or is dropped from the translation and named in `x-costgate-dropped-params`
(`dropped`), or — only where leaving it out would change what the client relies on — refused
with a 400 that names it. Codex sends fields no allow-list keeps up with (`client_metadata`,
`include: ["reasoning.encrypted_content"]`, reasoning summaries), so what costgate does not
know is dropped, not refused; a native upstream (config `apis: [responses]`) is sent the body
and judges it itself. Input items and tools are read one by one in items.py and responses_to_chat.py,
where their translation lives. docs/compat.md lists how each field is handled.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from gateway.apis.parsing import (
    Refusals,
    check_refusals,
    missing,
    unset,
    validate,
)
from gateway.core.wire import MODEL_NAME  # printable ASCII: the name goes into x-costgate-model


class _Open(BaseModel):
    """Known fields typed; unknown ones kept aside (`model_extra`), to be dropped and named."""

    model_config = ConfigDict(extra="allow", frozen=True)


class TextConfig(_Open):
    format: dict[str, Any] | None = None  # text | json_schema | json_object: responses_to_chat.py
    verbosity: Literal["low", "medium", "high"] | None = None


class Reasoning(_Open):
    effort: str | None = None
    summary: str | None = None
    generate_summary: str | None = None  # the deprecated name of `summary`
    context: str | None = None
    mode: str | None = None


class StreamOptions(_Open):
    include_obfuscation: bool | None = None  # costgate adds no obfuscation padding either way


class ResponsesRequest(_Open):
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
    include: list[str] | None = None  # extra outputs: none of them is produced by a translation
    # Refused unless absent or neutral: REFUSED below says why.
    background: Any = None
    conversation: Any = None
    prompt: Any = None

    @property
    def stores(self) -> bool:
        """Whether costgate keeps this response for `previous_response_id` and GET (default: yes)."""
        return self.store is not False


REFUSED: Refusals = {
    "background": (unset, "background responses are not supported; send the request and wait, or stream it"),
    "conversation": (unset, "the Conversations API is not served; use previous_response_id"),
    "prompt": (unset, "stored prompt templates live at OpenAI; send the prompt as input"),
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
    return req


def dropped(req: ResponsesRequest) -> list[str]:
    """What the Chat Completions translation leaves out: unknown fields, the extra outputs
    `include` asks for, reasoning settings other than effort (chat returns no summaries)."""
    names = sorted(req.model_extra or {})
    if req.include:
        names.append("include")
    for parent, value in (("reasoning", req.reasoning), ("text", req.text), ("stream_options", req.stream_options)):
        if value is not None:
            names += [f"{parent}.{name}" for name in sorted(value.model_extra or {})]
    if req.reasoning is not None:
        names += [
            f"reasoning.{n}" for n in ("summary", "generate_summary", "context", "mode") if getattr(req.reasoning, n)
        ]
    return names
