"""A fake OpenAI-compatible upstream: a real HTTP server for tests, benchmarks and dry runs.

It answers deterministically and misbehaves on request, chosen by the model name:

    any name            answers "echo: <last user text>", with usage
    fail-500 / fail-503 always that status            fail-429   429 with retry-after: 0
    flaky               500 on the first call of every three, then answers
    html                200 with an HTML page         garbage    200 with a body that is not JSON
    truncate            a stream cut after two chunks (no usage, no [DONE])
    no-usage            answers without a usage object
    slow                waits 2 s before answering    drip       streams one chunk every 0.2 s
                                                                 (counting each in `sent:drip`)
    reject              400 with an OpenAI error (the client's fault)
    json-stream         answers a stream request with a whole JSON answer (here and natively)
    echo-details        usage with details, as OpenAI reports them: half the prompt (rounded
                        down) cached, REASONING reasoning tokens more in the completion
    echo-fields         answers, naming the body's fields in `system_fingerprint`
    bill-openai         bills the way OpenAI does (issue 16's budget tests; tests/fakes/fake_billing.py)
    bill-endless        ignores max_tokens: a stream goes on until the client leaves

`GET /_stats` returns how many calls each model got; `POST /_reset` clears it. With batch prices,
it also serves OpenAI's Batch API for those models (tests/fakes/fake_batches.py). Also serves
`POST /v1/responses` and `POST /v1/messages` natively (tests/fakes/fake_native.py), whole and
streamed, so native passthrough and litellm's Anthropic provider can be tested offline.

Run: `python -m tests.fakes.fake_openai --port 9000`.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections import Counter
from decimal import Decimal
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from tests.fakes.fake_batches import FakeBatchApi
from tests.fakes.fake_billing import billing_answer
from tests.fakes.fake_native import NativeEndpoints, chat_completion
from tests.fakes.fake_tools import sse, tool_chunks, tool_completion, tool_message, wanted_tool


def words(text: str) -> int:
    return max(1, len(text.split()))


def prompt_text(body: dict[str, Any]) -> str:
    if "messages" in body:
        parts = []
        for m in body["messages"]:
            c = m.get("content")
            parts.append(c if isinstance(c, str) else " ".join(p.get("text", "") for p in c or []))
        return " ".join(parts)
    value = body.get("prompt", body.get("input", ""))
    return value if isinstance(value, str) else " ".join(map(str, value))


def last_user_text(body: dict[str, Any]) -> str:
    messages = body.get("messages") or []
    if messages and messages[-1].get("role") == "tool":  # a tool's answer: echo what it said
        content = messages[-1].get("content")
        return "tool said " + (content if isinstance(content, str) else prompt_text({"messages": messages[-1:]}))
    for m in reversed(messages):
        if m.get("role") == "user" and isinstance(m.get("content"), str):
            return m["content"]
    return prompt_text(body)


def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(data), status_code=status, headers=headers, media_type="application/json")


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return _json({"error": {"message": message, "type": "server_error", "code": None}}, status, headers)


REASONING = 7  # echo-details' reasoning tokens


def with_details(usage: dict[str, Any]) -> dict[str, Any]:
    completion = usage["completion_tokens"] + REASONING
    return {
        "prompt_tokens": usage["prompt_tokens"],
        "completion_tokens": completion,
        "total_tokens": usage["prompt_tokens"] + completion,
        "prompt_tokens_details": {"cached_tokens": usage["prompt_tokens"] // 2, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": REASONING, "accepted_prediction_tokens": 0},
    }


class FakeUpstream:
    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()

    def misbehave(self, model: str) -> Response | None:
        n = self.calls[model]
        if model.startswith("fail-"):
            status = int(model[5:])
            return _error(status, f"fake {status}", {"retry-after": "0"} if status == 429 else None)
        if model == "flaky" and n % 3 == 1:
            return _error(500, "fake flaky failure")
        if model == "reject":
            return _error(400, "fake: this request is invalid")
        if model == "html":
            return Response("<html><body>502 Bad Gateway</body></html>", media_type="text/html")
        if model == "garbage":
            return Response(b"\x00\xffnot json{{", media_type="application/json")
        return None

    async def chat(self, request: Request) -> Response:
        raw = await request.body()
        body = orjson.loads(raw)
        model = body.get("model", "")
        self.calls[model] += 1
        if (bad := self.misbehave(model)) is not None:
            return bad
        if model == "slow":
            await asyncio.sleep(2)
        chat = request.url.path.endswith("/chat/completions")
        if model.startswith("bill-"):
            return billing_answer(self.calls, raw, body, model, chat)
        answer = "echo: " + last_user_text(body)
        max_tokens = body.get("max_tokens") or body.get("max_completion_tokens")
        if max_tokens:
            answer = " ".join(answer.split()[:max_tokens])
        usage = {
            "prompt_tokens": words(prompt_text(body)),
            "completion_tokens": words(answer),
            "total_tokens": words(prompt_text(body)) + words(answer),
        }
        if model == "echo-details":
            usage = with_details(usage)
        tool = wanted_tool(body) if chat else None
        if tool is not None:
            message = tool_message(tool, last_user_text(body))
            if body.get("stream"):
                with_usage = (body.get("stream_options") or {}).get("include_usage")
                return StreamingResponse(
                    sse(tool_chunks(model, message, usage if with_usage else None)), media_type="text/event-stream"
                )
            return _json(tool_completion(model, message, usage))
        if body.get("stream") and model != "json-stream":
            return StreamingResponse(self._stream(body, model, answer, usage, chat), media_type="text/event-stream")
        choice = (
            {"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}
            if chat
            else {"index": 0, "text": answer, "finish_reason": "stop"}
        )
        data = {
            "id": f"fake-{self.calls[model]}",
            "object": "chat.completion" if chat else "text_completion",
            "created": int(time.time()),
            "model": model,
            "choices": [choice],
        }
        if model != "no-usage":
            data["usage"] = usage
        if body.get("seed") is not None:
            data["system_fingerprint"] = f"seed-{body['seed']}"
        if model == "echo-fields":
            data["system_fingerprint"] = "fields:" + ",".join(sorted(body))
        return _json(data)

    async def _stream(self, body: dict[str, Any], model: str, answer: str, usage: dict[str, int], chat: bool):
        base = {
            "id": "fake-stream",
            "object": "chat.completion.chunk" if chat else "text_completion",
            "created": int(time.time()),
            "model": model,
        }
        tokens = [w + " " for w in answer.split()]
        tokens[-1] = tokens[-1].rstrip()
        for i, token in enumerate(tokens):
            if model == "truncate" and i == 2:
                return
            if model == "drip":
                await asyncio.sleep(0.2)
            choice = (
                {"index": 0, "delta": {"content": token}, "finish_reason": None}
                if chat
                else {"index": 0, "text": token, "finish_reason": None}
            )
            yield b"data: " + orjson.dumps({**base, "choices": [choice]}) + b"\n\n"
            if model == "drip":  # what a stream cut short was billed: the tokens it was sent
                self.calls["sent:drip"] += 1
        final = (
            {"index": 0, "delta": {}, "finish_reason": "stop"}
            if chat
            else {"index": 0, "text": "", "finish_reason": "stop"}
        )
        yield b"data: " + orjson.dumps({**base, "choices": [final]}) + b"\n\n"
        if (body.get("stream_options") or {}).get("include_usage") and model != "no-usage":
            yield b"data: " + orjson.dumps({**base, "choices": [], "usage": usage}) + b"\n\n"
        yield b"data: [DONE]\n\n"

    async def embeddings(self, request: Request) -> Response:
        body = orjson.loads(await request.body())
        self.calls[body.get("model", "")] += 1
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        data = [{"object": "embedding", "index": i, "embedding": [0.1, 0.2, 0.3]} for i in range(len(inputs))]
        tokens = sum(words(str(x)) for x in inputs)
        return _json(
            {
                "object": "list",
                "data": data,
                "model": body.get("model"),
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )

    async def stats(self, _request: Request) -> Response:
        return _json(dict(self.calls))

    async def reset(self, _request: Request) -> Response:
        self.calls.clear()
        return _json({})


def echo_line(body: dict[str, Any]) -> tuple[str, dict[str, int]]:
    """A Batch API line's answer: the same echo, and usage, as the synchronous endpoint's."""
    answer = "echo: " + last_user_text(body)
    prompt, completion = words(prompt_text(body)), words(answer)
    return answer, {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def create_fake_app(
    batch_prices: dict[str, tuple[Decimal, Decimal]] | None = None, complete_after_s: float | None = 0.3
) -> Starlette:
    """`batch_prices` (upstream model -> dollars per input and output token at batch price) turns
    on the Batch API (tests/fakes/fake_batches.py) for those models."""
    fake = FakeUpstream()
    native = NativeEndpoints(
        fake.calls, lambda chat, model: chat_completion(chat, model, last_user_text, words, prompt_text)
    )
    batches = FakeBatchApi(batch_prices or {}, echo_line, complete_after_s)
    return Starlette(
        routes=[
            Route("/v1/files", batches.upload, methods=["POST"]),
            Route("/v1/files/{file_id}/content", batches.content),
            Route("/v1/batches", batches.create, methods=["POST"]),
            Route("/v1/batches", batches.list_batches, methods=["GET"]),
            Route("/v1/batches/{batch_id}", batches.retrieve),
            Route("/v1/batches/{batch_id}/cancel", batches.cancel, methods=["POST"]),
            Route("/_batches/{batch_id}/{how:str}", batches.finish, methods=["POST"]),
            Route("/_bill", batches.bill),
            Route("/v1/chat/completions", fake.chat, methods=["POST"]),
            Route("/v1/completions", fake.chat, methods=["POST"]),
            Route("/v1/embeddings", fake.embeddings, methods=["POST"]),
            Route("/v1/responses", native.responses, methods=["POST"]),
            Route("/v1/messages", native.messages, methods=["POST"]),
            Route("/_stats", fake.stats),
            Route("/_reset", fake.reset, methods=["POST"]),
        ]
    )


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9000)
    parser.add_argument(
        "--batch-price", action="append", default=[], help="MODEL:IN:OUT dollars per million tokens at batch price"
    )
    parser.add_argument("--complete-after-s", type=float, default=None, help="batches end by themselves after this")
    args = parser.parse_args()
    prices = {}
    for spec in args.batch_price:
        name, price_in, price_out = spec.rsplit(":", 2)
        prices[name] = (Decimal(price_in) / 10**6, Decimal(price_out) / 10**6)
    uvicorn.run(
        create_fake_app(prices, args.complete_after_s),
        host=args.host,
        port=args.port,
        log_level="warning",
        access_log=False,
        loop="uvloop",
        http="httptools",
    )


if __name__ == "__main__":
    main()
