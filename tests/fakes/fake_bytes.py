"""A provider that bills the way a worst-case byte-level tokenizer would: every UTF-8 byte of every
string in the prompt (message contents, system, tools, prompt, input, whatever the body carries
but its model name and settings) is one prompt token. It answers "ok" (two bytes, two completion
tokens), whole or streamed, on OpenAI's chat and completions APIs and natively on the Responses
and Messages APIs (so litellm's Anthropic provider and native passthrough reach it too).

A model whose name ends in `-silent` answers without usage, whole and streamed, as some
OpenAI-compatible hosts do: the gateway must then charge what its hold counted.

It keeps its own bill, per upstream model name: `GET /_bill` -> {model: {"calls", "prompt_tokens",
"completion_tokens"}} — the figures a ledger must equal. A stream is billed when it is answered,
whether or not the client reads it to the end, as a provider bills.

`BytesUpstream` serves it on a thread of the test process (uvicorn on a free port), so litellm
and the OpenAI provider reach it over real HTTP while the gateway runs in-process.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import AsyncIterator
from typing import Any

import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from tests.fakes.fake_native import NativeEndpoints
from tests.support import free_port, wait_until

ANSWER = "ok"
SILENT = "-silent"  # a model that reports no usage
SETTINGS = frozenset({"model", "stream", "stream_options", "max_tokens", "max_completion_tokens", "n", "temperature"})


def prompt_bytes(value: Any) -> int:
    """The UTF-8 bytes of every string in `value` (dict keys are structure, not prompt)."""
    if isinstance(value, str):
        return len(value.encode())
    if isinstance(value, dict):
        return sum(prompt_bytes(v) for v in value.values())
    if isinstance(value, list):
        return sum(prompt_bytes(v) for v in value)
    return 0


class Bill:
    def __init__(self) -> None:
        self.by_model: dict[str, dict[str, int]] = defaultdict(
            lambda: {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
        )

    def charge(self, model: str, body: dict[str, Any]) -> dict[str, int]:
        prompt = prompt_bytes({k: v for k, v in body.items() if k not in SETTINGS})
        line = self.by_model[model]
        line["calls"] += 1
        line["prompt_tokens"] += prompt
        line["completion_tokens"] += len(ANSWER)
        return {"prompt_tokens": prompt, "completion_tokens": len(ANSWER), "total_tokens": prompt + len(ANSWER)}


def _chunk(model: str, chat: bool, text: str | None, finish: str | None = None, usage: Any = None) -> bytes:
    if chat:
        choice = {"index": 0, "delta": {} if text is None else {"content": text}, "finish_reason": finish}
    else:
        choice = {"index": 0, "text": text or "", "finish_reason": finish}
    data: dict[str, Any] = {
        "id": "fake-bytes",
        "object": "chat.completion.chunk" if chat else "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [] if usage is not None else [choice],
    }
    if usage is not None:
        data["usage"] = usage
    return b"data: " + orjson.dumps(data) + b"\n\n"


async def _stream(model: str, chat: bool, usage: dict[str, int], with_usage: bool) -> AsyncIterator[bytes]:
    for letter in ANSWER:
        yield _chunk(model, chat, letter)
    yield _chunk(model, chat, None, "stop")
    if with_usage:
        yield _chunk(model, chat, None, usage=usage)
    yield b"data: [DONE]\n\n"


def create_bytes_app(bill: Bill) -> Starlette:
    async def openai_api(request: Request) -> Response:
        body = orjson.loads(await request.body())
        model, chat = str(body.get("model", "")), request.url.path.endswith("/chat/completions")
        usage = bill.charge(model, body)
        if body.get("stream"):
            asked = bool((body.get("stream_options") or {}).get("include_usage"))
            with_usage = asked and not model.endswith(SILENT)
            return StreamingResponse(_stream(model, chat, usage, with_usage), media_type="text/event-stream")
        choice = (
            {"index": 0, "message": {"role": "assistant", "content": ANSWER}, "finish_reason": "stop"}
            if chat
            else {"index": 0, "text": ANSWER, "finish_reason": "stop"}
        )
        answer = {"id": "fake-bytes", "object": "chat.completion" if chat else "text_completion", "created": 0}
        answer |= {"model": model, "choices": [choice]}
        return Response(orjson.dumps(answer if model.endswith(SILENT) else {**answer, "usage": usage}))

    def native_answer(chat_body: dict[str, Any], model: str) -> dict[str, Any]:
        usage = bill.charge(model, chat_body)
        choice = {"index": 0, "message": {"role": "assistant", "content": ANSWER}, "finish_reason": "stop"}
        return {
            "id": "fake-bytes",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [choice],
            "usage": usage,
        }

    native = NativeEndpoints(defaultdict(int), native_answer)  # type: ignore[arg-type]

    async def show_bill(_request: Request) -> Response:
        return Response(orjson.dumps(bill.by_model), media_type="application/json")

    return Starlette(
        routes=[
            Route("/v1/chat/completions", openai_api, methods=["POST"]),
            Route("/v1/completions", openai_api, methods=["POST"]),
            Route("/v1/responses", native.responses, methods=["POST"]),
            Route("/v1/messages", native.messages, methods=["POST"]),
            Route("/_bill", show_bill),
        ]
    )


class BytesUpstream:
    """The fake on a thread of this process, at `url` (…/v1)."""

    def __init__(self) -> None:
        self.bill = Bill()
        self.port = free_port()
        self.root = f"http://127.0.0.1:{self.port}"
        self.url = self.root + "/v1"
        config = uvicorn.Config(create_bytes_app(self.bill), port=self.port, log_level="warning", access_log=False)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        wait_until(lambda: self.server.started, 10, what="the bytes fake to start")

    def billed(self, model: str) -> dict[str, int]:
        return dict(self.bill.by_model.get(model) or {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0})

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)
