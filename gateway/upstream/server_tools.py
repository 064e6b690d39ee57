"""Provider-run tools a model's config prices (config `server_tools`): a native call may keep them,
capped, held and charged. Without one, every tool its provider bills per use is left out of the
call (gateway/core/request_fields.py `without_billed_tools`).

    server_tools:
      web_search: {max_calls: 5}   # per_call_usd: unset, litellm's map's search_context_cost_per_query

- Capped: Anthropic's web search tool is sent with `max_uses` at most `max_calls`; a Responses call
  with `max_tool_calls` at most `max_calls` (it counts every built-in tool call of the answer).
- Held: the worst case counts `max_calls` uses at their price (`fee_bound`).
- Charged: the uses the answer reports, at their price: Anthropic's
  `usage.server_tool_use.web_search_requests` (or a stream's `server_tool_use` blocks, if more),
  the Responses API's `web_search_call` output items (a stream's as they are announced, or its
  last Response's).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from types import MappingProxyType
from typing import Any

from gateway.config.models_config import ModelConfig
from gateway.core.request_fields import billed_kind

ZERO = Decimal(0)
ITEM_EVENTS = frozenset({"response.output_item.added", "response.output_item.done"})


@dataclass(frozen=True, slots=True)
class ServerTool:
    per_call: Decimal  # dollars a use
    max_calls: int  # uses a request at most


NONE: Mapping[str, ServerTool] = MappingProxyType({})


def resolve(config: ModelConfig, per_search: Decimal | None) -> Mapping[str, ServerTool]:
    """The config's priced tools, each at its configured price or the price map's."""
    found: dict[str, ServerTool] = {}
    for kind, tool in config.server_tools.items():
        price = tool.per_call_usd if tool.per_call_usd is not None else per_search
        if price is None:
            raise ValueError(
                f"model {config.name!r}: litellm's map has no price for a {kind} call of "
                f"{config.upstream_model!r}; give server_tools.{kind}.per_call_usd"
            )
        found[kind] = ServerTool(Decimal(price), tool.max_calls)
    return MappingProxyType(found) if found else NONE


def offered(api: str, body: Mapping[str, Any], tools: Mapping[str, ServerTool]) -> set[str]:
    """The kinds of priced tool a native `api` body offers the model."""
    listed = body.get("tools")
    if not tools or not isinstance(listed, list):
        return set()
    return {kind for tool in listed if (kind := billed_kind(api, tool)) is not None and kind in tools}


def capped(api: str, body: dict[str, Any], tools: Mapping[str, ServerTool]) -> dict[str, Any]:
    """`body` with the uses of each priced tool it offers capped at the config's `max_calls`."""
    kinds = offered(api, body, tools)
    if not kinds:
        return body
    if api == "messages":
        capped_tools = [
            dict(t, max_uses=_at_most(t.get("max_uses"), tools[k].max_calls))
            if (k := billed_kind(api, t)) is not None and k in kinds
            else t
            for t in body["tools"]
        ]
        return dict(body, tools=capped_tools)
    return dict(body, max_tool_calls=_at_most(body.get("max_tool_calls"), min(tools[k].max_calls for k in kinds)))


def _at_most(asked: Any, cap: int) -> int:
    return min(asked, cap) if isinstance(asked, int) and not isinstance(asked, bool) and asked > 0 else cap


def fee_bound(api: str | None, body: Mapping[str, Any] | None, tools: Mapping[str, ServerTool]) -> Decimal:
    """The most the priced tools a native body offers can cost: each at its cap."""
    if api is None or body is None:
        return ZERO
    return sum((tools[k].max_calls * tools[k].per_call for k in offered(api, body, tools)), ZERO)


@dataclass
class Uses:
    """The priced tools' uses an answer reports, whole (`of_answer`) or fed its stream's events."""

    api: str
    counts: dict[str, int] = field(default_factory=dict)
    _items: set[str] = field(default_factory=set)  # a stream's web_search_call item ids

    def of_answer(self, answer: Any) -> Uses:
        if isinstance(answer, dict):
            if self.api == "messages":
                self._read_usage(answer.get("usage"))
            else:
                self._read_output(answer.get("output"))
        return self

    def feed(self, event: dict[str, Any]) -> None:
        if self.api == "messages":
            self._read_usage(event.get("usage"))  # message_delta: the counts so far
            message = event.get("message")
            if isinstance(message, dict):
                self._read_usage(message.get("usage"))  # message_start
            block = event.get("content_block")  # a search begun: counted even if no usage follows
            if isinstance(block, dict) and block.get("type") == "server_tool_use" and block.get("name") == "web_search":
                self._items.add(str(block.get("id") or len(self._items)))
                self.counts["web_search"] = max(self.counts.get("web_search", 0), len(self._items))
        elif event.get("type") in ITEM_EVENTS:
            self._read_output([event.get("item")])
        elif isinstance(response := event.get("response"), dict):
            self._read_output(response.get("output"))

    def _read_usage(self, usage: Any) -> None:
        server = usage.get("server_tool_use") if isinstance(usage, dict) else None
        searches = server.get("web_search_requests") if isinstance(server, dict) else None
        if isinstance(searches, int) and not isinstance(searches, bool) and searches >= 0:
            self.counts["web_search"] = max(self.counts.get("web_search", 0), searches, len(self._items))

    def _read_output(self, output: Any) -> None:
        for item in output if isinstance(output, list) else ():
            if isinstance(item, dict) and item.get("type") == "web_search_call":
                self._items.add(str(item.get("id") or len(self._items)))
        if self._items:
            self.counts["web_search"] = len(self._items)

    def fee(self, tools: Mapping[str, ServerTool]) -> Decimal:
        return sum((n * tools[k].per_call for k, n in self.counts.items() if k in tools), ZERO)
