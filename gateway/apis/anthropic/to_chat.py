"""A parsed Messages request -> a Chat Completions body.

system, messages              -> messages (blocks.py)
tools                         -> function tools: input_schema -> parameters
tool_choice auto/any/tool/none -> auto / required / the named function / none;
                                 disable_parallel_tool_use -> parallel_tool_calls false
max_tokens                    -> max_completion_tokens
stop_sequences                -> stop
temperature, top_p            -> the same names (Anthropic's 0-1 temperature is within
                                 OpenAI's 0-2 range and sent as it is)
top_k                         -> top_k: vLLM (the bundled engine) and litellm's providers
                                 take it; OpenAI's own API does not (issue 14 item 3's
                                 per-model parameter drop is where that is handled)
metadata.user_id              -> user (costgate's tag stage charges it to that user)
output_config.format          -> response_format json_schema (strict, as Anthropic's is)
stream                        -> stream, always with usage (the answer is priced from it)
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from gateway.apis.anthropic.blocks import chat_messages, system_message
from gateway.apis.anthropic.request import Conversation, MessagesRequest
from gateway.apis.chat import function_tool
from gateway.apis.parsing import Refusals, check_refusals, unset, unsupported, validate

TOOL_CHOICE = {"auto": "auto", "any": "required", "none": "none"}
NO_CHAT_SETTING: Refusals = {
    name: (unset, "Chat Completions function tools have no such setting")
    for name in ("input_examples", "defer_loading", "allowed_callers")
}


class ToolSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    input_schema: dict[str, Any]
    description: str | None = None
    type: str | None = None
    strict: bool | None = None
    cache_control: Any = None  # a prompt-cache marker: nothing to translate it to
    eager_input_streaming: bool | None = None  # how finely input streams: chat streams it as it comes
    input_examples: list[Any] | None = None
    defer_loading: bool | None = None
    allowed_callers: list[str] | None = None


def conversation_body(req: Conversation) -> dict[str, Any]:
    """The model, messages and tools: all count_tokens needs, and the start of every body."""
    messages = [system_message(req.system)] if req.system else []
    body: dict[str, Any] = {"model": req.model, "messages": messages + chat_messages(req.messages)}
    if req.tools:
        body["tools"] = [chat_tool(tool, f"tools[{i}]") for i, tool in enumerate(req.tools)]
        if req.tool_choice is not None:
            _add_tool_choice(body, req.tool_choice)
    fmt = req.output_config.format if req.output_config else None
    if fmt is not None:
        if fmt.get("type") != "json_schema" or not isinstance(fmt.get("schema"), dict):
            raise unsupported("output_config.format", "only a json_schema format with a 'schema' object is known")
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "output", "schema": fmt["schema"], "strict": True},
        }
    return body


def to_chat_request(req: MessagesRequest) -> dict[str, Any]:
    body = conversation_body(req)
    body["max_completion_tokens"] = req.max_tokens
    if req.stop_sequences:
        body["stop"] = req.stop_sequences
    for name in ("temperature", "top_p", "top_k"):
        value = getattr(req, name)
        if value is not None:
            body[name] = value
    if req.metadata is not None and req.metadata.user_id is not None:
        body["user"] = req.metadata.user_id
    if req.stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


def chat_tool(tool: dict[str, Any], where: str) -> dict[str, Any]:
    if tool.get("type") not in (None, "custom"):
        raise unsupported(
            f"{where}.type",
            f"'{tool.get('type')}' is a tool Anthropic runs on its own side; costgate serves client tools only",
        )
    spec = validate(ToolSpec, tool, where)
    check_refusals(spec, NO_CHAT_SETTING, where)
    return function_tool(spec.name, spec.input_schema, spec.description, spec.strict)


def _add_tool_choice(body: dict[str, Any], choice: dict[str, Any]) -> None:
    kind = choice.get("type")
    if kind in TOOL_CHOICE:
        body["tool_choice"] = TOOL_CHOICE[kind]
    elif kind == "tool" and isinstance(choice.get("name"), str):
        body["tool_choice"] = {"type": "function", "function": {"name": choice["name"]}}
    else:
        raise unsupported("tool_choice", f"'{kind}' is not one of auto, any, tool, none")
    if choice.get("disable_parallel_tool_use"):
        body["parallel_tool_calls"] = False
