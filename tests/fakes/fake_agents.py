"""A fake Anthropic and OpenAI provider for the coding-agent CLIs (issue 29): Claude Code speaks
the Messages API, Codex the Responses API, and a gateway may translate either to Chat
Completions, so this one server speaks all three, the way the real providers answer an agent:

    POST /v1/messages               a Message, whole or streamed: with `thinking` asked, a
                                    thinking block with its signature and a redacted_thinking
                                    block; usage with prompt-cache writes, then reads, whenever
                                    the body carries cache_control markers
    POST /v1/messages/count_tokens  {"input_tokens": n}
    POST /v1/responses              a Response, whole or streamed: with
                                    include ["reasoning.encrypted_content"], a reasoning item
                                    carrying encrypted content; reasoning tokens in its usage
    POST /v1/chat/completions       a chat completion, whole or streamed (usage in the last
                                    chunk): cached tokens for a prompt seen before, reasoning
                                    tokens when reasoning_effort is asked

An agent's turn asks for a tool when its last user text contains TOOL_TRIGGER: the answer
calls the client's shell tool (Claude Code's `Bash`, Codex's `exec_command`) with
`echo TOOL_MARKER`; a turn that carries the tool's result answers "done: <result>". Any
other turn answers ANSWER.

Every request is recorded (`GET /_requests`: path, the API headers, body), and every answer
billed at PRICES (`GET /_bill`: the dollars the provider would charge, a decimal string), so a
test can compare the gateway's ledger with the provider's bill. `POST /_reset` clears both.

Run: `python -m tests.fakes.fake_agents --port 9000`.
"""

from __future__ import annotations

import argparse
import hashlib
import secrets
import time
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from tests.fakes.agent_streams import chat_chunks, message_events, response_events, sse

TOOL_TRIGGER = "costgate-tool"
TOOL_MARKER = "costgate-tool-ok"
ANSWER = "Hello from the fake provider."
THINKING = "The user wants a short greeting."
SIGNATURE = "EqQBCkYIBxgCKkD" + "fakesignature" * 8  # opaque to the client; must come back as sent
REDACTED = "EmwKAhgBEgy" + "fakeredacted" * 8
ENCRYPTED = "gAAAAABfake" + "encryptedreasoning" * 6
REASONING_TOKENS = 7
MTOK = Decimal(1_000_000)
# $ per million tokens: input, output, cache read, cache write (Anthropic's 5-minute write, 1.25x input).
PRICES = {"in": Decimal("3"), "out": Decimal("15"), "read": Decimal("0.3"), "write": Decimal("3.75")}
RECORDED_HEADERS = ("anthropic-version", "anthropic-beta", "x-api-key", "authorization", "user-agent")


def tokens_of(value: Any) -> int:
    """What the fake counts as tokens: a quarter of the JSON's bytes (at least 1)."""
    return max(1, len(orjson.dumps(value)) // 4)


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    out = []
    for part in content if isinstance(content, list) else ():
        if isinstance(part, dict):
            for key in ("text", "content", "output"):
                if isinstance(part.get(key), str):
                    out.append(part[key])
                elif isinstance(part.get(key), list):
                    out += _texts(part[key])
    return out


def tool_result_in(messages: list[Any]) -> str | None:
    """The result text of a tool the last user turn carries (any of the three APIs), else None."""
    last = messages[-1] if messages else {}
    if not isinstance(last, dict):
        return None
    if last.get("role") == "tool" or last.get("type") in ("function_call_output", "custom_tool_call_output"):
        return " ".join(_texts([last]))
    content = last.get("content")
    results = (
        [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
        if isinstance(content, list)
        else []
    )
    return " ".join(_texts(results)) if results else None


def wants_tool(messages: list[Any]) -> bool:
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    return bool(users) and TOOL_TRIGGER in " ".join(_texts(users[-1].get("content")))


@dataclass
class Bill:
    dollars: Decimal = Decimal(0)
    calls: int = 0

    def add(self, fresh: int, output: int, read: int = 0, write: int = 0) -> None:
        cost = fresh * PRICES["in"] + output * PRICES["out"] + read * PRICES["read"] + write * PRICES["write"]
        self.dollars += cost / MTOK
        self.calls += 1


@dataclass
class AgentFake:
    requests: list[dict[str, Any]] = field(default_factory=list)
    bill: Bill = field(default_factory=Bill)
    cached_prefixes: set[str] = field(default_factory=set)

    def record(self, request: Request, body: dict[str, Any]) -> None:
        headers = {k: request.headers[k] for k in RECORDED_HEADERS if k in request.headers}
        self.requests.append({"path": request.url.path, "headers": headers, "body": body})

    def cache_split(self, key: Any, total: int, marked: bool) -> tuple[int, int, int]:
        """(fresh, read, write) input tokens: 80% of a marked prompt is written to the cache the
        first time its prefix is seen, and read from it after."""
        if not marked:
            return total, 0, 0
        prefix = hashlib.sha256(orjson.dumps(key)).hexdigest()
        cached = total * 4 // 5
        if prefix in self.cached_prefixes:
            return total - cached, cached, 0
        self.cached_prefixes.add(prefix)
        return total - cached, 0, cached

    # --- Anthropic's Messages API ---------------------------------------------------------

    async def messages(self, request: Request) -> Response:
        body = orjson.loads(await request.body())
        self.record(request, body)
        content = self.message_content(body)
        fresh, read, write = self.cache_split(
            [body.get("system"), body.get("tools")], tokens_of(body), b"cache_control" in orjson.dumps(body)
        )
        output = tokens_of(content)
        self.bill.add(fresh, output, read, write)
        usage = {
            "input_tokens": fresh,
            "cache_creation_input_tokens": write,
            "cache_read_input_tokens": read,
            "output_tokens": output,
        }
        stop = "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn"
        message = {
            "id": "msg_fake" + secrets.token_hex(8),
            "type": "message",
            "role": "assistant",
            "model": body.get("model"),
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }
        if not body.get("stream"):
            return Response(orjson.dumps(message), media_type="application/json")
        return StreamingResponse(sse(message_events(message)), media_type="text/event-stream")

    def message_content(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        messages = body.get("messages") or []
        thinking = (body.get("thinking") or {}).get("type") in ("enabled", "adaptive")
        blocks: list[dict[str, Any]] = []
        if thinking:
            blocks += [
                {"type": "thinking", "thinking": THINKING, "signature": SIGNATURE},
                {"type": "redacted_thinking", "data": REDACTED},
            ]
        result = tool_result_in(messages)
        if result is not None:
            return [*blocks, {"type": "text", "text": f"done: {result.strip()}"}]
        tools = {t.get("name") for t in body.get("tools") or () if isinstance(t, dict)}
        if wants_tool(messages) and "Bash" in tools:
            command = {"command": f"echo {TOOL_MARKER}", "description": "Print a marker"}
            return [
                *blocks,
                {"type": "tool_use", "id": "toolu_fake" + secrets.token_hex(6), "name": "Bash", "input": command},
            ]
        return [*blocks, {"type": "text", "text": ANSWER}]

    async def count_tokens(self, request: Request) -> Response:
        body = orjson.loads(await request.body())
        self.record(request, body)
        return Response(orjson.dumps({"input_tokens": tokens_of(body)}), media_type="application/json")

    # --- OpenAI's Responses API -----------------------------------------------------------

    async def responses(self, request: Request) -> Response:
        body = orjson.loads(await request.body())
        self.record(request, body)
        items = (
            body.get("input")
            if isinstance(body.get("input"), list)
            else [{"role": "user", "content": body.get("input")}]
        )
        output: list[dict[str, Any]] = []
        reasoning = bool(body.get("reasoning"))
        if reasoning:
            item: dict[str, Any] = {"type": "reasoning", "id": "rs_fake" + secrets.token_hex(6), "summary": []}
            if "reasoning.encrypted_content" in (body.get("include") or ()):
                item["encrypted_content"] = ENCRYPTED
            output.append(item)
        output.append(self.responses_answer(body, items))
        total = tokens_of(body)
        cached = total // 2 if self._seen(body.get("prompt_cache_key") or body.get("instructions")) else 0
        reasoning_tokens = REASONING_TOKENS if reasoning else 0
        completion = tokens_of(output[-1]) + reasoning_tokens
        self._bill_openai(total, cached, completion)
        response = {
            "id": "resp_fake" + secrets.token_hex(8),
            "object": "response",
            "created_at": int(time.time()),
            "status": "completed",
            "model": body.get("model"),
            "output": output,
            "usage": {
                "input_tokens": total,
                "input_tokens_details": {"cached_tokens": cached},
                "output_tokens": completion,
                "output_tokens_details": {"reasoning_tokens": reasoning_tokens},
                "total_tokens": total + completion,
            },
        }
        if not body.get("stream"):
            return Response(orjson.dumps(response), media_type="application/json")
        return StreamingResponse(sse(response_events(response)), media_type="text/event-stream")

    def responses_answer(self, body: dict[str, Any], items: list[Any]) -> dict[str, Any]:
        result = tool_result_in(items)
        tools = {t.get("name") for t in body.get("tools") or () if isinstance(t, dict)}
        if result is None and wants_tool(items) and "exec_command" in tools:
            return {
                "type": "function_call",
                "id": "fc_fake" + secrets.token_hex(6),
                "call_id": "call_fake" + secrets.token_hex(6),
                "name": "exec_command",
                "arguments": orjson.dumps({"cmd": f"echo {TOOL_MARKER}"}).decode(),
                "status": "completed",
            }
        text = ANSWER if result is None else f"done: {result.strip()}"
        return {
            "type": "message",
            "id": "msg_fake" + secrets.token_hex(6),
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }

    # --- OpenAI's Chat Completions API ----------------------------------------------------

    async def chat(self, request: Request) -> Response:
        body = orjson.loads(await request.body())
        self.record(request, body)
        messages = body.get("messages") or []
        result = tool_result_in(messages)
        tools = {(t.get("function") or {}).get("name") for t in body.get("tools") or () if isinstance(t, dict)}
        message: dict[str, Any] = {"role": "assistant", "content": None}
        if result is None and wants_tool(messages) and tools & {"exec_command", "Bash"}:
            name = "exec_command" if "exec_command" in tools else "Bash"
            args = {"cmd": f"echo {TOOL_MARKER}"} if name == "exec_command" else {"command": f"echo {TOOL_MARKER}"}
            message["tool_calls"] = [
                {
                    "id": "call_fake" + secrets.token_hex(6),
                    "type": "function",
                    "function": {"name": name, "arguments": orjson.dumps(args).decode()},
                }
            ]
        else:
            message["content"] = ANSWER if result is None else f"done: {result.strip()}"
        total = tokens_of(messages) + (tokens_of(body["tools"]) if body.get("tools") else 0)
        cached = total // 2 if self._seen(messages[:1]) else 0
        reasoning_tokens = REASONING_TOKENS if body.get("reasoning_effort") else 0
        completion = tokens_of(message) + reasoning_tokens
        self._bill_openai(total, cached, completion)
        usage = {
            "prompt_tokens": total,
            "completion_tokens": completion,
            "total_tokens": total + completion,
            "prompt_tokens_details": {"cached_tokens": cached},
            "completion_tokens_details": {"reasoning_tokens": reasoning_tokens},
        }
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        answer = {
            "id": "chatcmpl-fake" + secrets.token_hex(6),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage,
        }
        if not body.get("stream"):
            return Response(orjson.dumps(answer), media_type="application/json")
        return StreamingResponse(chat_chunks(answer), media_type="text/event-stream")

    def _seen(self, key: Any) -> bool:
        prefix = "openai:" + hashlib.sha256(orjson.dumps(key)).hexdigest()
        seen = prefix in self.cached_prefixes
        self.cached_prefixes.add(prefix)
        return seen

    def _bill_openai(self, total: int, cached: int, completion: int) -> None:
        # Reasoning tokens are output tokens at the output rate (costgate's config prices them so).
        self.bill.add(total - cached, completion, read=cached)

    # --- the test's view ------------------------------------------------------------------

    async def seen(self, _request: Request) -> Response:
        return Response(orjson.dumps(self.requests), media_type="application/json")

    async def billed(self, _request: Request) -> Response:
        return Response(
            orjson.dumps({"usd": str(self.bill.dollars), "calls": self.bill.calls}), media_type="application/json"
        )

    async def reset(self, _request: Request) -> Response:
        self.requests.clear()
        self.bill = Bill()
        self.cached_prefixes.clear()
        return Response(b"{}", media_type="application/json")


def create_agent_fake(fake: AgentFake | None = None) -> Starlette:
    fake = fake or AgentFake()
    app = Starlette(
        routes=[
            Route("/v1/messages", fake.messages, methods=["POST"]),
            Route("/v1/messages/count_tokens", fake.count_tokens, methods=["POST"]),
            Route("/v1/responses", fake.responses, methods=["POST"]),
            Route("/v1/chat/completions", fake.chat, methods=["POST"]),
            Route("/_requests", fake.seen, methods=["GET"]),
            Route("/_stats", fake.billed, methods=["GET"]),  # what tests/support.FakeUpstream waits for
            Route("/_bill", fake.billed, methods=["GET"]),
            Route("/_reset", fake.reset, methods=["POST"]),
        ]
    )
    app.state.fake = fake
    return app


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=9000)
    args = parser.parse_args()
    uvicorn.run(create_agent_fake(), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
