"""A client's body on the wire: parsed, with the nesting limit every later step can live with,
then checked against OpenAI's request shapes before anything is spent on it.

orjson reads values nested up to 1024 levels but writes only up to 254, and the gateway
writes a body again (the upstream call, cache keys, batch lines): a body nested deeper in a
field nobody checks once got through validation and failed there as a 500. It is refused
when parsed instead, as 400.

Only what the gateway relies on is checked; other fields (response_format, logprobs, seed,
vendor fields) pass these models untouched, and what goes upstream is then decided by the
allow-list of gateway/core/request_fields.py, not here.
"""

from __future__ import annotations

from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gateway.core.context import Endpoint
from gateway.core.errors import InvalidRequest

MAX_DEPTH = 254  # the deepest value orjson.dumps writes


def parse_json_body(raw: bytes) -> Any:
    try:
        body = orjson.loads(raw)  # rejects invalid UTF-8 too
    except orjson.JSONDecodeError as err:
        raise InvalidRequest(f"the request body is not valid JSON: {err}") from None
    check_depth(raw, body)
    return body


def check_depth(raw: bytes, body: Any) -> None:
    """Raise InvalidRequest if `body` (parsed from `raw`) nests deeper than MAX_DEPTH."""
    # Counting brackets is a cheap bound on the depth: only bodies with more of them than
    # the limit (long conversations, say) pay for the real check.
    if raw.count(b"[") + raw.count(b"{") <= MAX_DEPTH:
        return
    try:
        # The real check is the writer itself: it fails on exactly the values it cannot write,
        # and a value parsed from JSON can fail it for no other reason.
        orjson.dumps(body)
    except orjson.JSONEncodeError:
        raise InvalidRequest(f"the request body nests deeper than {MAX_DEPTH} levels") from None


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
