"""Chat stream chunks -> the Responses API's typed stream events, one translator per response.

The events come in OpenAI's order, each with the next `sequence_number`:

    response.created, response.in_progress                                   start()
    for each output item, one after the other:
      message        output_item.added, content_part.added, output_text.delta ...
                     (refusal.delta ... for a refusal part), output_text.done,
                     content_part.done, output_item.done
      function_call  output_item.added, function_call_arguments.delta ...,
                     function_call_arguments.done, output_item.done
    response.completed (or response.incomplete, with its reason)             finish()
    response.failed, when the upstream fails mid-stream                      fail()

An item is closed as soon as the next one starts or the chat answer's finish_reason arrives
(chat streams send one tool call's deltas after another's, never interleaved); the terminal
event waits for finish(), because the chat usage chunk comes after finish_reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gateway.apis.chat import ChatUsage, ToolCall, read_chat
from gateway.apis.responses.output import (
    ResponseMeta,
    envelope,
    function_call_item,
    incomplete_reason,
    message_item,
    new_id,
    output_text_part,
    refusal_part,
    response_usage,
)
from gateway.apis.responses.responses_request import ResponsesRequest
from gateway.core.errors import GatewayError


@dataclass(slots=True)
class _Message:
    id: str
    index: int  # output_index
    parts: list[tuple[str, list[str]]] = field(default_factory=list)  # (output_text | refusal, deltas)


@dataclass(slots=True)
class _Call:
    id: str
    index: int
    chat_index: int  # the chat stream's tool call index, which its later deltas carry
    call_id: str
    name: str
    arguments: list[str] = field(default_factory=list)


class ResponsesStream:
    def __init__(self, req: ResponsesRequest, meta: ResponseMeta) -> None:
        self.req, self.meta = req, meta
        self.sequence = 0
        self.output: list[dict[str, Any]] = []  # finished items, in output order
        self.open: _Message | _Call | None = None
        self.finish_reason: str | None = None
        self.usage: ChatUsage | None = None
        self.service_tier: str | None = None
        self.response: dict[str, Any] | None = None  # the final Response, once finished or failed

    def _event(self, kind: str, **fields: Any) -> dict[str, Any]:
        event = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return event

    def _envelope(self, status: str, **fields: Any) -> dict[str, Any]:
        return envelope(
            self.req, self.meta, status=status, output=list(self.output), service_tier=self.service_tier, **fields
        )

    def start(self) -> list[dict[str, Any]]:
        response = self._envelope("in_progress")
        return [
            self._event("response.created", response=response),
            self._event("response.in_progress", response=response),
        ]

    def feed(self, chunk: Any) -> list[dict[str, Any]]:
        """The events for one chat chunk (its parsed `data:` JSON)."""
        answer = read_chat(chunk)
        self.usage = answer.usage or self.usage
        self.service_tier = answer.service_tier or self.service_tier
        choice = answer.choice
        if choice is None:
            return []
        events: list[dict[str, Any]] = []
        delta = choice.delta
        if delta.content:
            events += self._text("output_text", delta.content)
        if delta.refusal:
            events += self._text("refusal", delta.refusal)
        for call in delta.tool_calls or ():
            events += self._call(call)
        if choice.finish_reason:
            self.finish_reason = choice.finish_reason
            events += self._close()
        return events

    def finish(self, usage: ChatUsage | None = None) -> list[dict[str, Any]]:
        """The closing events; `usage` stands in when the upstream reported none."""
        events = self._close()
        incomplete = incomplete_reason(self.finish_reason)
        final_usage = self.usage or usage
        self.response = self._envelope(
            "incomplete" if incomplete else "completed",
            incomplete=incomplete,
            usage=response_usage(final_usage) if final_usage else None,
        )
        kind = "response.incomplete" if incomplete else "response.completed"
        return events + [self._event(kind, response=self.response)]

    def fail(self, err: GatewayError) -> list[dict[str, Any]]:
        """The stream's end when the upstream fails after it started."""
        code = "rate_limit_exceeded" if err.status == 429 else "server_error"
        self.response = self._envelope("failed", error={"code": code, "message": err.message})
        return [self._event("response.failed", response=self.response)]

    def _text(self, kind: str, delta: str) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        if not isinstance(self.open, _Message):
            events += self._close()
            self.open = _Message(new_id("msg"), len(self.output))
            events.append(
                self._event(
                    "response.output_item.added",
                    output_index=self.open.index,
                    item=message_item(self.open.id, [], "in_progress"),
                )
            )
        message = self.open
        if not message.parts or message.parts[-1][0] != kind:
            events += self._close_part(message)
            message.parts.append((kind, []))
            events.append(self._event("response.content_part.added", **self._where(message), part=_part(kind, "")))
        message.parts[-1][1].append(delta)
        name = "response.output_text.delta" if kind == "output_text" else "response.refusal.delta"
        extra: dict[str, Any] = {"logprobs": []} if kind == "output_text" else {}
        events.append(self._event(name, **self._where(message), delta=delta, **extra))
        return events

    def _call(self, call: ToolCall) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        if not (isinstance(self.open, _Call) and self.open.chat_index == call.index):
            events += self._close()
            self.open = _Call(
                new_id("fc"), len(self.output), call.index, call.id or new_id("call"), call.function.name or ""
            )
            events.append(
                self._event(
                    "response.output_item.added",
                    output_index=self.open.index,
                    item=self._call_item(self.open, "in_progress"),
                )
            )
        if call.function.arguments:
            self.open.arguments.append(call.function.arguments)
            events.append(
                self._event(
                    "response.function_call_arguments.delta",
                    item_id=self.open.id,
                    output_index=self.open.index,
                    delta=call.function.arguments,
                )
            )
        return events

    def _close(self) -> list[dict[str, Any]]:
        item, self.open = self.open, None
        if isinstance(item, _Message):
            events = self._close_part(item)
            status = "incomplete" if incomplete_reason(self.finish_reason) else "completed"
            done = message_item(item.id, [_part(kind, "".join(d)) for kind, d in item.parts], status)
        elif isinstance(item, _Call):
            events = [
                self._event(
                    "response.function_call_arguments.done",
                    item_id=item.id,
                    output_index=item.index,
                    arguments="".join(item.arguments),
                    name=item.name,
                )
            ]
            done = self._call_item(item, "completed")
        else:
            return []
        self.output.append(done)
        return events + [self._event("response.output_item.done", output_index=item.index, item=done)]

    def _close_part(self, message: _Message) -> list[dict[str, Any]]:
        if not message.parts:
            return []
        kind, deltas = message.parts[-1]
        text = "".join(deltas)
        where = self._where(message)
        done = (
            self._event("response.output_text.done", **where, text=text, logprobs=[])
            if kind == "output_text"
            else self._event("response.refusal.done", **where, refusal=text)
        )
        return [done, self._event("response.content_part.done", **where, part=_part(kind, text))]

    @staticmethod
    def _where(message: _Message) -> dict[str, Any]:
        return {"item_id": message.id, "output_index": message.index, "content_index": len(message.parts) - 1}

    @staticmethod
    def _call_item(call: _Call, status: str) -> dict[str, Any]:
        return function_call_item(call.id, call.call_id, call.name, "".join(call.arguments), status)


def _part(kind: str, text: str) -> dict[str, Any]:
    return output_text_part(text) if kind == "output_text" else refusal_part(text)
