"""An Anthropic-compatible provider with a prompt cache, and the bill it keeps (issue 26).

It caches as Anthropic documents it (docs.anthropic.com, "Prompt caching"):

- The prompt is tools, then system, then messages, in blocks (each tool definition, each system
  block, each message's content block; a string is one block). A block with `cache_control`
  is a breakpoint; more than four is a 400.
- A breakpoint's prefix (every block up to and including it) is written to the cache when it is
  at least `min_tokens` long; a shorter one is silently not cached.
- A read finds the longest cached prefix ending at a breakpoint or at one of the 20 block
  boundaries before it. A hit refreshes the entry's TTL (5 minutes, or 1 hour with
  `"ttl": "1h"`).
- Usage: `cache_read_input_tokens` (the prefix read), `cache_creation_input_tokens` (from there
  to the last breakpoint, split by TTL in `cache_creation`), `input_tokens` (the rest).

The bill: each request at the model's rates, per API key, exact (Decimal). Tokens are this
provider's own count (a block's JSON, 4 characters a token), which the gateway never sees:
it prices the usage reported, as it must for the real provider. The cache is shared by every
caller of one API key (Anthropic's organization), which is what costgate's team isolation is for.
`/v1/messages` serves Anthropic's API, whole and streamed; the clock is injectable.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.fakes.agent_streams import message_events, typed_sse

M = Decimal(1_000_000)
LOOKBACK = 20
TTL_S = {"5m": 300.0, "1h": 3600.0}


@dataclass(frozen=True)
class Rates:
    """Dollars per million tokens (claude-sonnet-4-5's)."""

    input: Decimal = Decimal(3)
    output: Decimal = Decimal(15)
    read: Decimal = Decimal("0.3")
    write_5m: Decimal = Decimal("3.75")
    write_1h: Decimal = Decimal(6)

    def price_config(self) -> dict[str, str]:
        """The same rates as costgate's `price:` block."""
        return {
            "input_per_mtok": str(self.input),
            "output_per_mtok": str(self.output),
            "cached_input_per_mtok": str(self.read),
            "cache_write_per_mtok": str(self.write_5m),
            "cache_write_1h_per_mtok": str(self.write_1h),
        }


@dataclass
class Ledger:
    """What the provider bills, per API key, and what the same input had cost uncached."""

    usd: dict[str, Decimal] = field(default_factory=dict)
    uncached_input_usd: dict[str, Decimal] = field(default_factory=dict)
    input_usd: dict[str, Decimal] = field(default_factory=dict)
    requests: list[dict[str, Any]] = field(default_factory=list)  # (body, usage) as received
    by_day_model: dict[tuple[str, str], Decimal] = field(default_factory=dict)  # what its cost report shows

    def total(self) -> Decimal:
        return sum(self.usd.values(), Decimal(0))

    def input_share(self) -> Decimal:
        """What the input cost, as a share of its uncached price."""
        uncached = sum(self.uncached_input_usd.values(), Decimal(0))
        return sum(self.input_usd.values(), Decimal(0)) / uncached if uncached else Decimal(0)


def _tokens(block: Any) -> int:
    return max(1, len(orjson.dumps(block, option=orjson.OPT_SORT_KEYS)) // 4)


def _blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The prompt's blocks in cache order, each as sent (a bare string as a text block)."""
    out: list[dict[str, Any]] = [dict(t) for t in body.get("tools") or ()]
    system = body.get("system")
    out += [{"type": "text", "text": system}] if isinstance(system, str) else [dict(b) for b in system or ()]
    for message in body.get("messages") or ():
        content = message.get("content")
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or ())
        out += [{"role": message.get("role"), **part} for part in parts]
    return out


class AnthropicCacheFake:
    def __init__(self, min_tokens: int = 1024, rates: Rates | None = None, clock: Callable[[], float] = time.time):
        self.min_tokens = min_tokens
        self.rates = rates or Rates()
        self.clock = clock
        self.bill = Ledger()
        self._cache: dict[tuple[str, str], float] = {}  # (api key, prefix hash) -> expiry
        self.app = Starlette(routes=[Route("/v1/messages", self.messages, methods=["POST"])])

    def deployment(self, name: str = "claude", **fields: Any) -> dict[str, Any]:
        """A gateway config's model entry for this provider at its own rates, served natively
        (/v1/messages goes through as the client wrote it) through a transport to `self.app`."""
        return {
            "name": name,
            "provider": "openai",
            "model": "claude-sonnet-4-5",
            "api_base": "http://anthropic.test/v1",
            "api_key": "sk-ant-upstream",
            "apis": ["chat", "messages"],
            "price": self.rates.price_config(),
            **fields,
        }

    async def messages(self, request: Request) -> Response:
        key = request.headers.get("x-api-key") or ""
        body = orjson.loads(await request.body())
        try:
            usage = self.usage(key, body)
        except ValueError as err:
            error = {"type": "error", "error": {"type": "invalid_request_error", "message": str(err)}}
            return JSONResponse(error, status_code=400)
        usage["output_tokens"] = 8
        self._charge(key, usage, str(body.get("model")))
        self.bill.requests.append({"body": body, "usage": usage})
        message = {
            "id": "msg_fake_" + hashlib.sha256(orjson.dumps(body)).hexdigest()[:12],
            "type": "message",
            "role": "assistant",
            "model": body.get("model"),
            "content": [{"type": "text", "text": "ok, noted."}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": usage,
        }
        if body.get("stream"):
            return Response(b"".join(map(typed_sse, message_events(message))), media_type="text/event-stream")
        return JSONResponse(message)

    def usage(self, key: str, body: dict[str, Any]) -> dict[str, Any]:
        blocks = _blocks(body)
        sizes = [_tokens(b) for b in blocks]
        ends = [sum(sizes[: i + 1]) for i in range(len(sizes))]
        hashes = self._prefix_hashes(blocks)
        marks = [i for i, b in enumerate(blocks) if isinstance(b.get("cache_control"), dict)]
        if len(marks) > 4:
            raise ValueError(f"A maximum of 4 blocks with cache_control may be provided. Found {len(marks)}.")
        now = self.clock()
        read_to = self._longest_hit(key, marks, hashes, ends, now)
        writes = {"5m": 0, "1h": 0}
        written_to = ends[read_to] if read_to is not None else 0
        for i in marks:
            if ends[i] < self.min_tokens or ends[i] <= written_to:
                continue
            ttl = (
                (blocks[i]["cache_control"].get("ttl") or "5m")
                if isinstance(blocks[i]["cache_control"], dict)
                else "5m"
            )
            writes[ttl if ttl in TTL_S else "5m"] += ends[i] - written_to
            written_to = ends[i]
            self._cache[(key, hashes[i])] = now + TTL_S.get(ttl, 300.0)
        read = ends[read_to] if read_to is not None else 0
        total = ends[-1] if ends else 0
        return {
            "input_tokens": total - written_to,
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": writes["5m"] + writes["1h"],
            "cache_creation": {"ephemeral_5m_input_tokens": writes["5m"], "ephemeral_1h_input_tokens": writes["1h"]},
        }

    def _longest_hit(self, key: str, marks: list[int], hashes: list[str], ends: list[int], now: float) -> int | None:
        best: int | None = None
        for mark in marks:
            for i in range(mark, max(-1, mark - LOOKBACK - 1), -1):
                expiry = self._cache.get((key, hashes[i]))
                if expiry is not None and expiry > now:
                    if best is None or ends[i] > ends[best]:
                        best = i
                    break
        if best is not None:  # a read refreshes the entry's TTL
            expiry = self._cache[(key, hashes[best])]
            self._cache[(key, hashes[best])] = max(expiry, now + 300.0)
        return best

    @staticmethod
    def _prefix_hashes(blocks: list[dict[str, Any]]) -> list[str]:
        out, h = [], hashlib.sha256()
        for block in blocks:
            plain = {k: v for k, v in block.items() if k != "cache_control"}  # a marker is not content
            h.update(orjson.dumps(plain, option=orjson.OPT_SORT_KEYS))
            out.append(h.copy().hexdigest())
        return out

    def _charge(self, key: str, usage: dict[str, Any], model: str) -> None:
        r, split = self.rates, usage["cache_creation"]
        input_usd = (
            usage["input_tokens"] * r.input
            + usage["cache_read_input_tokens"] * r.read
            + split["ephemeral_5m_input_tokens"] * r.write_5m
            + split["ephemeral_1h_input_tokens"] * r.write_1h
        ) / M
        prompt = usage["input_tokens"] + usage["cache_read_input_tokens"] + usage["cache_creation_input_tokens"]
        b = self.bill
        b.input_usd[key] = b.input_usd.get(key, Decimal(0)) + input_usd
        b.uncached_input_usd[key] = b.uncached_input_usd.get(key, Decimal(0)) + prompt * r.input / M
        usd = input_usd + usage["output_tokens"] * r.output / M
        b.usd[key] = b.usd.get(key, Decimal(0)) + usd
        day = time.strftime("%Y-%m-%d", time.gmtime(self.clock()))
        b.by_day_model[(day, model)] = b.by_day_model.get((day, model), Decimal(0)) + usd
