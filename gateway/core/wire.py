"""OpenAI request shapes, used to check a body before anything is spent on it.

Only what the gateway relies on is checked; other fields (response_format, logprobs, seed,
vendor fields) pass these models untouched, and what goes upstream is then decided by the
allow-list of gateway/core/request_fields.py, not here.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gateway.core.context import Endpoint
from gateway.core.errors import InvalidRequest

# Printable ASCII: a model name is echoed in the x-costgate-model header, which must be latin-1
# and free of control characters (a client's emoji model name answered 500 and a dropped
# connection before this rule).
MODEL_NAME = r"^[!-~]+$"
Role = Literal["system", "developer", "user", "assistant", "tool", "function"]


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class StreamOptions(_Open):
    include_usage: bool | None = None


class ContentPart(_Open):
    type: str | None = None
    text: str = ""  # counted as prompt tokens: text when present (an image part has none)


class ToolCall(_Open):
    function: dict[str, Any] | None = None


class Tool(_Open):
    # OpenAI's chat tools are functions and custom tools. Other kinds (MCP servers, a vendor's
    # server-side search) would make litellm, or the provider, call out to hosts the client names,
    # at prices no budget knows.
    type: Literal["function", "custom"]


class Message(_Open):
    role: Role
    content: str | list[ContentPart] | None = None
    tool_calls: list[ToolCall] | None = None


class _Generation(_Open):
    model: str = Field(min_length=1, max_length=256, pattern=MODEL_NAME)
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    n: int | None = Field(default=None, ge=1, le=128)
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    user: str | None = Field(default=None, max_length=256)
    metadata: dict[str, str] | None = None


class ChatRequest(_Generation):
    messages: list[Message] = Field(min_length=1, max_length=10_000)
    tools: list[Tool] | None = None


class CompletionRequest(_Generation):
    prompt: str | list[str] | list[int] | list[list[int]]


class EmbeddingRequest(_Open):
    model: str = Field(min_length=1, max_length=256, pattern=MODEL_NAME)
    input: str | list[str] | list[int] | list[list[int]]
    user: str | None = Field(default=None, max_length=256)


REQUEST_MODELS: dict[Endpoint, type[BaseModel]] = {
    Endpoint.CHAT: ChatRequest,
    Endpoint.COMPLETIONS: CompletionRequest,
    Endpoint.EMBEDDINGS: EmbeddingRequest,
}


def validate_body(endpoint: Endpoint, body: Any) -> None:
    if not isinstance(body, dict):
        raise InvalidRequest("the request body must be a JSON object")
    try:
        REQUEST_MODELS[endpoint].model_validate(body)
    except ValidationError as err:
        first = err.errors()[0]
        param = ".".join(str(p) for p in first["loc"])
        raise InvalidRequest(f"invalid '{param}': {first['msg']}", param=param) from None
