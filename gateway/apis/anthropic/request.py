"""The parameters of `POST /v1/messages` and `POST /v1/messages/count_tokens`, typed.

A parameter either translates to Chat Completions, or changes nothing a chat upstream could do
differently (prompt-cache markers, the standard service tier), or is refused with a 400 that
names it. Unknown parameters are refused, as Anthropic refuses them, and so are what the
client's API version removed (headers.py). Content blocks and tools are checked one by one in
blocks.py and to_chat.py, where their translation lives.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from gateway.apis.anthropic.headers import ApiVersion
from gateway.apis.parsing import (
    MODEL_NAME,
    Refusals,
    check_refusals,
    unset,
    unsupported,
    validate,
)
from gateway.errors import InvalidRequest

# API version 2026-10-21 removed them: a request that sends any is refused, as Anthropic does.
SAMPLING = ("temperature", "top_p", "top_k")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Metadata(_Strict):
    user_id: str | None = Field(default=None, max_length=256)


class OutputConfig(_Strict):
    format: dict[str, Any] | None = None  # {"type": "json_schema", "schema": {...}}: to_chat.py
    effort: str | None = None


class Conversation(_Strict):
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
    speed: Literal["standard", "fast"] | None = None
    # Refused unless absent: REFUSED below says why.
    context_management: Any = None
    user_profile_id: Any = None
    workspace_id: Any = None
    container: Any = None
    mcp_servers: Any = None
    diagnostics: Any = None
    inference_geo: Any = None


class MessagesRequest(Conversation):
    max_tokens: int = Field(ge=0)
    stop_sequences: list[str] | None = None
    temperature: float | None = Field(default=None, ge=0, le=1)
    top_p: float | None = Field(default=None, ge=0, le=1)
    top_k: int | None = Field(default=None, ge=0)
    metadata: Metadata | None = None
    stream: bool | None = None
    # costgate never buys priority capacity, so "standard_only" already holds and "auto" is met.
    service_tier: Literal["auto", "standard_only"] | None = None


REFUSED: Refusals = {
    "thinking": (
        lambda v: v is None or v.get("type") == "disabled",
        "extended thinking has no Chat Completions equivalent; leave it out or disable it",
    ),
    "speed": (lambda v: v in (None, "standard"), "fast mode is Anthropic's own capacity"),
    "context_management": (unset, "server-side context editing is not supported"),
    "user_profile_id": (unset, "Anthropic user profiles do not apply through costgate"),
    "workspace_id": (unset, "Anthropic workspaces do not apply through costgate; costgate's key names the team"),
    "container": (unset, "code-execution containers run at Anthropic only"),
    "mcp_servers": (unset, "MCP connectors run at Anthropic only"),
    "diagnostics": (unset, "prompt-cache diagnostics are Anthropic's own"),
    "inference_geo": (unset, "costgate cannot promise where a chat upstream runs"),
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
    if req.output_config is not None and req.output_config.effort is not None:
        raise unsupported("output_config.effort", "Anthropic's effort levels have no Chat Completions equivalent")


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
