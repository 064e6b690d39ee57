"""Anthropic messages and content blocks -> Chat Completions messages.

    system (string or text blocks)  -> a leading system message
    user: text, image               -> a user message (image: base64 -> a data: URL, or its URL)
    user: tool_result               -> a `tool` message each, placed before the user's other
                                       blocks (chat wants tool answers right after the call)
    assistant: text, tool_use       -> one assistant message: content + tool_calls (input as JSON)
    a `system` role message         -> a system message where it stands

Dropped and named (`messages[].content[].<type>`): an assistant's thinking and redacted
thinking (a chat upstream cannot read another model's signed reasoning; the client keeps its
own copy, and a native upstream gets them byte for byte), and server tools' blocks in its
history. Refused: documents, images by file id, images inside tool results (a chat tool
message carries text only) — leaving those out would change what the model answers.
`cache_control` and `citations` on a block are hints that change nothing a chat upstream
would answer, and are not sent. A tool result's `is_error` has no chat counterpart: its
content goes through as it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field

from gateway.apis.parsing import unsupported, validate


class _Block(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class MessageParam(_Block):
    role: Literal["user", "assistant", "system"]
    content: str | list[dict[str, Any]]


class TextBlock(_Block):
    text: str


class ImageSource(_Block):
    type: str
    media_type: str | None = None
    data: str | None = None
    url: str | None = None


class ImageBlock(_Block):
    source: ImageSource


class ToolUseBlock(_Block):
    id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    input: dict[str, Any]


class ToolResultBlock(_Block):
    tool_use_id: str = Field(min_length=1)
    content: str | list[dict[str, Any]] = ""
    is_error: bool | None = None


def system_message(system: str | list[dict[str, Any]]) -> dict[str, Any]:
    if isinstance(system, str):
        return {"role": "system", "content": system}
    texts = [_text(block, f"system[{i}]") for i, block in enumerate(system)]
    return {"role": "system", "content": texts[0]["text"] if len(texts) == 1 else texts}


# An assistant's blocks a chat upstream has no place for, left out of the translation.
ASSISTANT_DROPPED = frozenset(
    {"thinking", "redacted_thinking", "server_tool_use", "web_search_tool_result", "web_fetch_tool_result"}
)


def chat_messages(messages: Sequence[dict[str, Any]], dropped: list[str] | None = None) -> list[dict[str, Any]]:
    dropped = [] if dropped is None else dropped
    out: list[dict[str, Any]] = []
    for i, raw in enumerate(messages):
        where = f"messages[{i}]"
        message = validate(MessageParam, raw, where)
        if message.role == "system":
            out.append(system_message(message.content))
        elif message.role == "assistant":
            out.append(_assistant(message.content, f"{where}.content", dropped))
        else:
            out.extend(_user(message.content, f"{where}.content"))
    return out


def _kind(block: Any) -> Any:
    return block.get("type") if isinstance(block, dict) else None


def _text(block: Any, where: str) -> dict[str, Any]:
    if _kind(block) != "text":
        raise unsupported(f"{where}.type", f"'{_kind(block)}' blocks cannot be translated here; text only")
    return {"type": "text", "text": validate(TextBlock, block, where).text}


def _user(content: str | list[dict[str, Any]], where: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"role": "user", "content": content}]
    tool_messages, parts = [], []
    for j, block in enumerate(content):
        at = f"{where}[{j}]"
        kind = _kind(block)
        if kind == "tool_result":
            result = validate(ToolResultBlock, block, at)
            tool_messages.append(
                {
                    "role": "tool",
                    "tool_call_id": result.tool_use_id,
                    "content": _tool_result(result.content, f"{at}.content"),
                }
            )
        elif kind == "text":
            parts.append(_text(block, at))
        elif kind == "image":
            parts.append(_image(validate(ImageBlock, block, at), at))
        else:
            raise unsupported(f"{at}.type", f"'{kind}' blocks cannot be translated to Chat Completions")
    if not parts:
        return tool_messages
    if len(parts) == 1 and parts[0]["type"] == "text":
        return [*tool_messages, {"role": "user", "content": parts[0]["text"]}]
    return [*tool_messages, {"role": "user", "content": parts}]


def _image(block: ImageBlock, where: str) -> dict[str, Any]:
    source = block.source
    if source.type == "base64" and source.data and source.media_type:
        url = f"data:{source.media_type};base64,{source.data}"
    elif source.type == "url" and source.url:
        url = source.url
    else:
        raise unsupported(f"{where}.source", "images by file id need Anthropic's file store; send base64 or a URL")
    return {"type": "image_url", "image_url": {"url": url}}


def _tool_result(content: str | list[dict[str, Any]], where: str) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    parts = [_text(block, f"{where}[{j}]") for j, block in enumerate(content)]
    return parts[0]["text"] if len(parts) == 1 else parts


def _assistant(content: str | list[dict[str, Any]], where: str, dropped: list[str]) -> dict[str, Any]:
    if isinstance(content, str):
        return {"role": "assistant", "content": content}
    texts, calls = [], []
    for j, block in enumerate(content):
        at = f"{where}[{j}]"
        kind = _kind(block)
        if kind == "text":
            texts.append(validate(TextBlock, block, at).text)
        elif kind == "tool_use":
            use = validate(ToolUseBlock, block, at)
            calls.append(
                {
                    "id": use.id,
                    "type": "function",
                    "function": {"name": use.name, "arguments": orjson.dumps(use.input).decode()},
                }
            )
        elif kind in ASSISTANT_DROPPED:
            dropped.append(f"messages[].content[].{kind}")
        else:
            raise unsupported(f"{at}.type", f"'{kind}' blocks cannot be sent to a Chat Completions upstream")
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None}
    if calls:
        message["tool_calls"] = calls
    return message
