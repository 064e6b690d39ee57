"""A parsed Responses request (and the conversation before it) -> a Chat Completions body.

    instructions            -> a leading system message (this request's only: OpenAI does not
                               carry earlier responses' instructions over)
    input                   -> messages (items.py), after the earlier conversation
    tools (function)        -> chat's nested {"type": "function", "function": {...}}
    tool_choice             -> chat's shapes (none / auto / required / a function / allowed_tools)
    text.format             -> response_format; text.verbosity -> verbosity
    reasoning.effort        -> reasoning_effort
    max_output_tokens       -> max_completion_tokens
    stream                  -> stream, always with usage (the answer is priced from it)
    temperature, top_p, user, metadata, parallel_tool_calls, prompt_cache_key,
    prompt_cache_retention, safety_identifier, service_tier -> the same names

`store`, `previous_response_id` and `max_tool_calls` stay with costgate (response_chain.py); in chat,
`store` would ask OpenAI to keep the completion, which is not what the client asked for.

Dropped and named (x-costgate-dropped-params, responses_request.py's `dropped` and `tools[].<type>`):
tools other than functions (Codex's freeform `custom` apply_patch, `web_search`, `tool_search`,
`local_shell`: a chat model could not call them the way the client expects, and the client
falls back on its function tools), tool settings chat lacks. `mcp` tools name servers and carry
their credentials: refused (issue 16).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from gateway.apis.chat import function_tool
from gateway.apis.parsing import unsupported, validate
from gateway.apis.responses.items import add_items
from gateway.apis.responses.responses_request import ResponsesRequest
from gateway.apis.responses.responses_request import dropped as request_dropped

# Passed on unchanged: the two APIs give them the same name and meaning.
SAME_NAME = (
    "temperature",
    "top_p",
    "user",
    "metadata",
    "prompt_cache_key",
    "prompt_cache_retention",
    "safety_identifier",
    "service_tier",
)


NO_CHAT_SETTING = ("defer_loading", "allowed_callers", "output_schema")


class FunctionTool(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)  # unknown settings: dropped and named
    type: str
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None
    defer_loading: bool | None = None
    allowed_callers: list[str] | None = None
    output_schema: dict[str, Any] | None = None


def input_items(req: ResponsesRequest) -> list[dict[str, Any]]:
    """The request's input as a list of items (a string is one user message), as stored."""
    if req.input is None:
        return []
    if isinstance(req.input, str):
        return [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": req.input}]}]
    return list(req.input)


def to_chat_request(
    req: ResponsesRequest, history: Sequence[dict[str, Any]] = (), dropped: list[str] | None = None
) -> dict[str, Any]:
    """The chat body for `req`; `history` is the earlier conversation's items (response_chain.py). What
    is left out is named in `dropped`."""
    dropped = [] if dropped is None else dropped
    dropped += request_dropped(req)
    messages: list[dict[str, Any]] = []
    if req.instructions:
        messages.append({"role": "system", "content": req.instructions})
    add_items(messages, history, "previous_response_id", dropped)
    add_items(messages, input_items(req), "input", dropped)
    body: dict[str, Any] = {"model": req.model, "messages": messages}
    for name in SAME_NAME:
        value = getattr(req, name)
        if value is not None:
            body[name] = value
    if req.max_output_tokens is not None:
        body["max_completion_tokens"] = req.max_output_tokens
    if req.reasoning is not None and req.reasoning.effort is not None:
        body["reasoning_effort"] = req.reasoning.effort
    _add_text(body, req)
    _add_tools(body, req, dropped)
    if req.stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


def _add_text(body: dict[str, Any], req: ResponsesRequest) -> None:
    if req.text is None:
        return
    if req.text.verbosity is not None:
        body["verbosity"] = req.text.verbosity
    fmt = req.text.format
    if fmt is None or fmt.get("type") == "text":
        return
    if fmt.get("type") == "json_object":
        body["response_format"] = {"type": "json_object"}
    elif fmt.get("type") == "json_schema":
        if not isinstance(fmt.get("name"), str) or not isinstance(fmt.get("schema"), dict):
            raise unsupported("text.format", "a json_schema format needs a 'name' and a 'schema' object")
        schema = {k: fmt[k] for k in ("name", "schema", "description", "strict") if fmt.get(k) is not None}
        body["response_format"] = {"type": "json_schema", "json_schema": schema}
    else:
        raise unsupported("text.format.type", f"'{fmt.get('type')}' is not a text format costgate knows")


def _add_tools(body: dict[str, Any], req: ResponsesRequest, dropped: list[str]) -> None:
    # Chat refuses tool_choice and parallel_tool_calls without tools; Responses allows them.
    tools = [t for t in (chat_tool(tool, f"tools[{i}]", dropped) for i, tool in enumerate(req.tools or ())) if t]
    if not tools:
        return
    body["tools"] = tools
    if req.tool_choice is not None:
        body["tool_choice"] = chat_tool_choice(req.tool_choice)
    if req.parallel_tool_calls is not None:
        body["parallel_tool_calls"] = req.parallel_tool_calls


def chat_tool(tool: dict[str, Any], where: str, dropped: list[str]) -> dict[str, Any] | None:
    """A function tool in chat's shape; None (and named in `dropped`) for any other kind."""
    kind = tool.get("type")
    if kind == "mcp":
        raise unsupported(f"{where}.type", "MCP tools name servers and carry their credentials; a request may not")
    if kind != "function":
        dropped.append(f"tools[].{kind}")
        return None
    spec = validate(FunctionTool, tool, where)
    dropped += [f"tools[].{name}" for name in NO_CHAT_SETTING if getattr(spec, name) is not None]
    dropped += [f"tools[].{name}" for name in spec.model_extra or {}]
    return function_tool(spec.name, spec.parameters, spec.description, spec.strict)


def chat_tool_choice(choice: str | dict[str, Any]) -> str | dict[str, Any]:
    if isinstance(choice, str):
        if choice not in ("none", "auto", "required"):
            raise unsupported("tool_choice", f"'{choice}' is not one of none, auto, required")
        return choice
    kind = choice.get("type")
    if kind == "function" and isinstance(choice.get("name"), str):
        return {"type": "function", "function": {"name": choice["name"]}}
    if kind == "allowed_tools" and choice.get("mode") in ("auto", "required"):
        tools = choice.get("tools") or []
        named = [t for t in tools if isinstance(t, dict) and t.get("type") == "function" and t.get("name")]
        if len(named) != len(tools):
            raise unsupported("tool_choice.tools", "only function tools can be allowed")
        return {
            "type": "allowed_tools",
            "allowed_tools": {
                "mode": choice["mode"],
                "tools": [{"type": "function", "function": {"name": t["name"]}} for t in named],
            },
        }
    raise unsupported("tool_choice", f"a '{kind}' tool choice names a tool costgate does not run")
