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
metadata.user_id              -> user (costgate charges it to that user: gateway/core/asked.py)
output_config.format          -> response_format json_schema (strict, as Anthropic's is)
output_config.effort, thinking -> reasoning_effort (EFFORT; an `enabled` budget by its size;
                                 `adaptive` or `disabled` alone: the upstream's default)
stream                        -> stream, always with usage (the answer is priced from it)

Dropped and named (x-costgate-dropped-params): fields with no chat equivalent (context
management, speed, containers, unknown fields), tools Anthropic runs itself or defines itself
(`tools[].<type>`), tool settings chat lacks, and thinking blocks in the history.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from gateway.apis.anthropic.blocks import chat_messages, system_message
from gateway.apis.anthropic.messages_request import Conversation, MessagesRequest
from gateway.apis.anthropic.messages_request import dropped as request_dropped
from gateway.apis.chat import function_tool
from gateway.apis.parsing import unsupported, validate

TOOL_CHOICE = {"auto": "auto", "any": "required", "none": "none"}
NO_CHAT_SETTING = ("input_examples", "defer_loading", "allowed_callers")
# Anthropic's effort levels -> OpenAI's reasoning_effort (chat has no level above high).
EFFORT = {"low": "low", "medium": "medium", "high": "high", "xhigh": "high", "max": "high"}
# An `enabled` thinking budget (tokens) -> the effort of its size: below 4k low, below 16k medium.
BUDGET_STEPS = ((4096, "low"), (16384, "medium"))


class ToolSpec(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)  # unknown settings: dropped and named
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


def reasoning_effort(req: Conversation) -> str | None:
    """The chat reasoning setting a Messages request's effort or thinking budget stands for."""
    effort = req.output_config.effort if req.output_config else None
    if effort is not None:
        return EFFORT.get(effort, "medium")
    thinking = req.thinking or {}
    budget = thinking.get("budget_tokens")
    if thinking.get("type") != "enabled" or not isinstance(budget, int):
        return None
    return next((level for limit, level in BUDGET_STEPS if budget < limit), "high")


def conversation_body(req: Conversation, dropped: list[str] | None = None) -> dict[str, Any]:
    """The model, messages and tools: all count_tokens needs, and the start of every body.
    What is left out is named in `dropped`."""
    dropped = [] if dropped is None else dropped
    dropped += request_dropped(req)
    messages = [system_message(req.system)] if req.system else []
    body: dict[str, Any] = {"model": req.model, "messages": messages + chat_messages(req.messages, dropped)}
    tools = [t for t in (chat_tool(tool, f"tools[{i}]", dropped) for i, tool in enumerate(req.tools or ())) if t]
    if tools:
        body["tools"] = tools
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


def to_chat_request(req: MessagesRequest, dropped: list[str] | None = None) -> dict[str, Any]:
    body = conversation_body(req, dropped)
    effort = reasoning_effort(req)
    if effort is not None:
        body["reasoning_effort"] = effort
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


def chat_tool(tool: dict[str, Any], where: str, dropped: list[str]) -> dict[str, Any] | None:
    """A client tool as a chat function tool; None (and named) for a tool Anthropic runs or
    defines itself (web search, code execution, its bash and text editor), which a chat model
    could not call the way the client expects."""
    kind = tool.get("type")
    if kind not in (None, "custom"):
        dropped.append(f"tools[].{kind}")
        return None
    spec = validate(ToolSpec, tool, where)
    dropped += [f"tools[].{name}" for name in NO_CHAT_SETTING if getattr(spec, name) is not None]
    dropped += [f"tools[].{name}" for name in spec.model_extra or {}]
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
