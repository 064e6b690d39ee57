"""The parameters of `POST /v1/messages` and `POST /v1/messages/count_tokens`, typed.

A parameter either translates to Chat Completions (messages_to_chat.py), or is dropped there and named
in `x-costgate-dropped-params` (`dropped`), or — only where dropping it would change what the
client relies on, or it names hosts or credentials — is refused with a 400 that names it. The
clients that send the newest fields (Claude Code: thinking, effort, context management, betas)
move faster than any list, so a field costgate does not know is dropped, not refused; a native
upstream (config `apis: [messages]`) is sent the body as it came and judges it itself. What the
client's API version removed is refused (headers.py), as Anthropic does. Content blocks and
tools are read one by one in blocks.py and messages_to_chat.py, where their translation lives.
docs/compat.md lists how each field is handled.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from gateway.apis.anthropic.headers import ApiVersion
from gateway.apis.parsing import (
    Refusals,
    check_refusals,
    unset,
    unsupported,
    validate,
)
from gateway.core.errors import InvalidRequest
from gateway.core.wire import MODEL_NAME  # printable ASCII: the name goes into x-costgate-model

# API version 2026-10-21 removed them: a request that sends any is refused, as Anthropic does.
SAMPLING = ("temperature", "top_p", "top_k")


class _Open(BaseModel):
    """Known fields typed; unknown ones kept aside (`model_extra`), to be dropped and named."""

    model_config = ConfigDict(extra="allow", frozen=True)


class Metadata(_Open):
    user_id: str | None = Field(default=None, max_length=512)


class OutputConfig(_Open):
    format: dict[str, Any] | None = None  # {"type": "json_schema", "schema": {...}}: messages_to_chat.py
    effort: str | None = None  # -> reasoning_effort (messages_to_chat.py)


class Conversation(_Open):
    """What both endpoints take: the model and what it reads."""

    model: str = Field(min_length=1, max_length=256, pattern=MODEL_NAME)
    messages: list[dict[str, Any]] = Field(min_length=1, max_length=100_000)
    system: str | list[dict[str, Any]] | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: dict[str, Any] | None = None
    thinking: dict[str, Any] | None = None
    output_config: OutputConfig | None = None
    # Prompt-cache markers: chat upstreams cache prompt prefixes on their own, so there is
    # nothing to translate them to and nothing they would change in the answer.
    cache_control: Any = None
    # MCP connectors name servers and carry their tokens (issue 16): refused on every path.
    mcp_servers: Any = None


class MessagesRequest(Conversation):
    max_tokens: int = Field(ge=0)
    stop_sequences: list[str] | None = None
    temperature: float | None = Field(default=None, ge=0, le=1)
    top_p: float | None = Field(default=None, ge=0, le=1)
    top_k: int | None = Field(default=None, ge=0)
    metadata: Metadata | None = None
    stream: bool | None = None
    service_tier: Any = None  # priced apart: dropped (gateway/core/request_fields.py)


REFUSED: Refusals = {
    "mcp_servers": (unset, "MCP connectors name servers and carry their credentials; a request may not choose them"),
}


def _check_version(body: Any, version: ApiVersion) -> None:
    if version is not ApiVersion.V2026_10_21 or not isinstance(body, dict):
        return
    for name in SAMPLING:
        if name in body:
            raise InvalidRequest(
                f"{name}: Extra inputs are not permitted (removed in anthropic-version "
                f"{version.value}; 2023-06-01 has it)",
                param=name,
                code="unknown_parameter",
            )
    for i, message in enumerate(body.get("messages") or ()):
        content = message.get("content") if isinstance(message, dict) and message.get("role") == "user" else None
        for j, block in enumerate(content if isinstance(content, list) else ()):
            if isinstance(block, dict) and block.get("type") == "text" and block.get("citations"):
                raise InvalidRequest(
                    f"messages[{i}].content[{j}].citations: citations on a user text block are "
                    f"refused in anthropic-version {version.value}",
                    param=f"messages[{i}].content[{j}].citations",
                )


def _check(req: Conversation) -> None:
    check_refusals(req, REFUSED)


def dropped(req: Conversation) -> list[str]:
    """The top-level fields (and output_config's, metadata's) the translation has no use for."""
    names = sorted(req.model_extra or {})
    for parent, value in (("output_config", req.output_config), ("metadata", getattr(req, "metadata", None))):
        if isinstance(value, BaseModel):
            names += [f"{parent}.{name}" for name in sorted(value.model_extra or {})]
    if getattr(req, "service_tier", None) is not None:
        names.append("service_tier")
    return names


def parse_request(body: Any, version: ApiVersion = ApiVersion.V2023_06_01) -> MessagesRequest:
    _check_version(body, version)
    req = validate(MessagesRequest, body)
    _check(req)
    if req.max_tokens == 0:  # Anthropic's cache pre-warming: a chat upstream cannot answer with nothing
        raise unsupported("max_tokens", "0 (prompt-cache pre-warming) is not supported; ask for at least 1 token")
    return req


def parse_count_tokens(body: Any, version: ApiVersion = ApiVersion.V2023_06_01) -> Conversation:
    _check_version(body, version)
    req = validate(Conversation, body)
    _check(req)
    return req
