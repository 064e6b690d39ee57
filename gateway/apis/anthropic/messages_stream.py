"""Chat stream chunks -> Anthropic's Messages stream events, one translator per message.

The events come in Anthropic's order (each sent with an `event:` line of the same name,
gateway/core/sse.py's typed_event):

    message_start                      start(): an empty Message; its input_tokens is the
                                       caller's estimate, as the chat usage only comes last
    content_block_start, ping          the first block, then a ping, as Anthropic sends it
    content_block_delta ...            text_delta for text, input_json_delta for a tool's input
    content_block_stop                 when the next block starts or finish_reason arrives
    message_delta, message_stop        finish(): the stop reason and the final, cumulative
                                       usage (input tokens included, which the SDK takes over)
    error                              fail(): an upstream failure after the stream started

Chat streams (OpenAI, vLLM, litellm) send one tool call's deltas after another's, never
interleaved; a call index seen again after another began would start a new block.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gateway.apis.anthropic.anthropic_errors import anthropic_error
from gateway.apis.anthropic.message import (
    MessageMeta,
    message_usage,
    new_tool_use_id,
    stop_reason,
)
from gateway.apis.chat import ChatUsage, Choice, ToolCall, read_chat
from gateway.core.errors import GatewayError


@dataclass(frozen=True, slots=True)
class _Block:
    index: int  # Anthropic's content block index
    tool_index: int | None  # the chat stream's tool call index; None for a text block


class MessagesStream:
    def __init__(self, meta: MessageMeta, input_tokens: int = 0) -> None:
        self.meta = meta
        self.input_tokens = input_tokens
        self.blocks = 0
        self.open: _Block | None = None
        self.last: Choice | None = None  # the choice that carried finish_reason
        self.refused = False
        self.usage: ChatUsage | None = None

    def start(self) -> list[dict[str, Any]]:
        usage = {
            "input_tokens": self.input_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": 0,
        }
        return [
            {
                "type": "message_start",
                "message": {
                    "id": self.meta.id,
                    "type": "message",
                    "role": "assistant",
                    "model": self.meta.model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": usage,
                },
            }
        ]

    def feed(self, chunk: Any) -> list[dict[str, Any]]:
        """The events for one chat chunk (its parsed `data:` JSON)."""
        answer = read_chat(chunk)
        self.usage = answer.usage or self.usage
        choice = answer.choice
        if choice is None:
            return []
        events: list[dict[str, Any]] = []
        delta = choice.delta
        self.refused = self.refused or bool(delta.refusal)
        text = (delta.content or "") + (delta.refusal or "")
        if text:
            events += self._text(text)
        for call in delta.tool_calls or ():
            events += self._call(call)
        if choice.finish_reason:
            self.last = choice
            events += self._close()
        return events

    def finish(self, usage: ChatUsage | None = None) -> list[dict[str, Any]]:
        """The closing events; `usage` stands in when the upstream reported none."""
        events = self._close()
        reason, sequence = stop_reason(self.last or Choice(), self.meta, self.refused)
        return events + [
            {
                "type": "message_delta",
                "delta": {"stop_reason": reason, "stop_sequence": sequence},
                "usage": message_usage(self.usage or usage),
            },
            {"type": "message_stop"},
        ]

    @staticmethod
    def fail(err: GatewayError) -> list[dict[str, Any]]:
        return [anthropic_error(err)]

    def _start_block(
        self, tool_index: int | None, content_block: dict[str, Any]
    ) -> tuple[_Block, list[dict[str, Any]]]:
        events = self._close()
        block = self.open = _Block(self.blocks, tool_index)
        self.blocks += 1
        events.append({"type": "content_block_start", "index": block.index, "content_block": content_block})
        if block.index == 0:
            events.append({"type": "ping"})
        return block, events

    def _text(self, text: str) -> list[dict[str, Any]]:
        block, events = self.open, list[dict[str, Any]]()
        if block is None or block.tool_index is not None:
            block, events = self._start_block(None, {"type": "text", "text": ""})
        return events + [
            {"type": "content_block_delta", "index": block.index, "delta": {"type": "text_delta", "text": text}}
        ]

    def _call(self, call: ToolCall) -> list[dict[str, Any]]:
        block, events = self.open, list[dict[str, Any]]()
        if block is None or block.tool_index != call.index:
            block, events = self._start_block(
                call.index,
                {"type": "tool_use", "id": call.id or new_tool_use_id(), "name": call.function.name or "", "input": {}},
            )
        if call.function.arguments:
            events.append(
                {
                    "type": "content_block_delta",
                    "index": block.index,
                    "delta": {"type": "input_json_delta", "partial_json": call.function.arguments},
                }
            )
        return events

    def _close(self) -> list[dict[str, Any]]:
        block, self.open = self.open, None
        return [] if block is None else [{"type": "content_block_stop", "index": block.index}]
