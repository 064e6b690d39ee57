"""Responses input items -> Chat Completions messages.

    message (user / system / developer)   -> a user or system message; input_text, input_image
                                             (URL or data: URL) and input_file (file_data) parts
    message (assistant), output messages  -> an assistant message (output_text, refusal)
    function_call                         -> a tool call on the assistant message before it
                                             (or a new one): one turn's calls stay one message
    function_call_output                  -> a `tool` message

    custom_tool_call                      -> a tool call whose arguments are {"input": <input>}
    custom_tool_call_output               -> a `tool` message

Dropped and named (`input[].<type>`): reasoning items (a chat upstream cannot read another
model's encrypted reasoning; the client keeps them) and the items of tools OpenAI runs itself or
that costgate does not offer a chat model (web search, tool search, local shell…), each call
with its output so no tool message is left without its call. Item references are refused: they
need OpenAI's item store, and leaving them out would change what the model reads. `developer`
becomes `system`: every chat upstream knows that role, and OpenAI treats the two alike for
chat models. Item ids and statuses only describe an item and are not sent on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field

from gateway.apis.parsing import unsupported, validate


class _Item(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class MessageItem(_Item):
    role: Literal["user", "assistant", "system", "developer"]
    content: str | list[dict[str, Any]]


class FunctionCallItem(_Item):
    call_id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    arguments: str


class FunctionCallOutputItem(_Item):
    call_id: str = Field(min_length=1)  # optional in OpenAI's schema, but a chat tool message needs it
    output: str | list[dict[str, Any]]


class TextPart(_Item):
    text: str


class ImagePart(_Item):
    image_url: str | None = None
    file_id: str | None = None
    detail: str = "auto"


class FilePart(_Item):
    file_data: str | None = None
    filename: str | None = None


class RefusalPart(_Item):
    refusal: str


class CustomCallItem(_Item):
    call_id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    input: str


class CustomCallOutputItem(_Item):
    call_id: str = Field(min_length=1)
    output: str | list[dict[str, Any]]


def add_items(messages: list[dict[str, Any]], items: Sequence[Any], at: str, dropped: list[str]) -> None:
    """Append the chat messages for `items` (named `at[i]` in errors) to `messages`; the kinds
    left out are named in `dropped`."""
    for i, raw in enumerate(items):
        where = f"{at}[{i}]"
        kind = raw.get("type", "message") if isinstance(raw, dict) else "message"
        if kind == "message":
            messages.append(_message(validate(MessageItem, raw, where), where))
        elif kind == "function_call":
            _add_call(messages, validate(FunctionCallItem, raw, where))
        elif kind == "custom_tool_call":
            custom = validate(CustomCallItem, raw, where)
            arguments = orjson.dumps({"input": custom.input}).decode()
            _add_call(messages, FunctionCallItem(call_id=custom.call_id, name=custom.name, arguments=arguments))
        elif kind in ("function_call_output", "custom_tool_call_output"):
            out = validate(CustomCallOutputItem, raw, where)
            messages.append(
                {"role": "tool", "tool_call_id": out.call_id, "content": _tool_output(out.output, f"{where}.output")}
            )
        elif kind == "item_reference":
            raise unsupported(f"{where}.type", "item references need OpenAI's item store; send the item itself")
        else:
            dropped.append(f"{at}[].{kind}")


def _add_call(messages: list[dict[str, Any]], call: FunctionCallItem) -> None:
    tool_call = {"id": call.call_id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
    last = messages[-1] if messages else None
    if last is not None and last["role"] == "assistant":
        last.setdefault("tool_calls", []).append(tool_call)
    else:
        messages.append({"role": "assistant", "content": None, "tool_calls": [tool_call]})


def _message(item: MessageItem, where: str) -> dict[str, Any]:
    if item.role == "assistant":
        return _assistant(item.content, f"{where}.content")
    role = "user" if item.role == "user" else "system"
    content = item.content
    if isinstance(content, str):
        return {"role": role, "content": content}
    parts = [_input_part(part, f"{where}.content[{j}]") for j, part in enumerate(content)]
    if len(parts) == 1 and parts[0]["type"] == "text":
        return {"role": role, "content": parts[0]["text"]}  # a plain string: every upstream takes it
    return {"role": role, "content": parts}


def _assistant(content: str | list[dict[str, Any]], where: str) -> dict[str, Any]:
    if isinstance(content, str):
        return {"role": "assistant", "content": content}
    texts, refusals = [], []
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in ("output_text", "input_text"):
            texts.append(validate(TextPart, part, f"{where}[{j}]").text)
        elif kind == "refusal":
            refusals.append(validate(RefusalPart, part, f"{where}[{j}]").refusal)
        else:
            raise unsupported(f"{where}[{j}].type", f"'{kind}' content cannot be part of an assistant message")
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None}
    if refusals:
        message["refusal"] = "".join(refusals)
    return message


def _input_part(part: Any, where: str) -> dict[str, Any]:
    kind = part.get("type") if isinstance(part, dict) else None
    if kind in ("input_text", "output_text"):
        return {"type": "text", "text": validate(TextPart, part, where).text}
    if kind == "input_image":
        image = validate(ImagePart, part, where)
        if image.image_url is None:
            raise unsupported(
                f"{where}.file_id", "images by file id need OpenAI's file store; send image_url (a URL or a data: URL)"
            )
        return {"type": "image_url", "image_url": {"url": image.image_url, "detail": image.detail}}
    if kind == "input_file":
        file = validate(FilePart, part, where)
        if file.file_data is None:
            raise unsupported(where, "files by id or URL need OpenAI's file store; send file_data")
        return {"type": "file", "file": {"file_data": file.file_data, "filename": file.filename or "file"}}
    raise unsupported(f"{where}.type", f"'{kind}' content cannot be translated to Chat Completions")


def _tool_output(output: str | list[dict[str, Any]], where: str) -> str | list[dict[str, Any]]:
    if isinstance(output, str):
        return output
    parts = []
    for j, part in enumerate(output):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind != "input_text":
            raise unsupported(f"{where}[{j}].type", "a Chat Completions tool message carries text only")
        parts.append({"type": "text", "text": validate(TextPart, part, f"{where}[{j}]").text})
    return parts
