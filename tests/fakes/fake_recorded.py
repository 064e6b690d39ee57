"""A fake OpenAI-compatible upstream that serves recorded answers, for cascade tests and
benchmarks: the same question gets the answer a real model once gave.

`--answers FILE` is JSONL, one object a line:

    {"prompt": "<the last user message>",
     "answers": {"<upstream model name>": "text"
                 | {"content": "text", "logprobs": [-0.1, ...], "finish_reason": "stop"}}}

A request is matched by its model and its last user message. Without a recorded answer the
model echoes (`echo: <text>`), like tests/fakes/fake_openai.py. Usage is counted with
tiktoken (cl100k), so costs match what a real upstream of that size would bill. Logprobs are
returned only when the request asks for them and the record has them. A model named
`fail-500` always answers 500. `GET /_stats` counts calls per model; `POST /_reset` clears them.

Run: `python -m tests.fakes.fake_recorded --answers FILE --port 9100`.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from gateway.core.tokens import count_prompt, count_text
from tests.fakes.fake_openai import last_user_text


def load_answers(path: Path) -> dict[tuple[str, str], dict[str, Any]]:
    table: dict[tuple[str, str], dict[str, Any]] = {}
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        obj = json.loads(line)
        for model, answer in obj["answers"].items():
            table[(model, obj["prompt"])] = answer if isinstance(answer, dict) else {"content": answer}
    return table


def _json(data: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(data), status_code=status, media_type="application/json")


class RecordedUpstream:
    def __init__(self, answers: dict[tuple[str, str], dict[str, Any]]) -> None:
        self.answers = answers
        self.calls: Counter[str] = Counter()

    async def chat(self, request: Request) -> Response:
        body = orjson.loads(await request.body())
        model = body.get("model", "")
        self.calls[model] += 1
        if model == "fail-500":
            return _json({"error": {"message": "fake 500", "type": "server_error"}}, 500)
        question = last_user_text(body)
        record = self.answers.get((model, question), {"content": "echo: " + question})
        content = record["content"]
        usage = {"prompt_tokens": count_prompt(body), "completion_tokens": count_text(content)}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": content},
            "finish_reason": record.get("finish_reason", "stop"),
        }
        if body.get("logprobs") and record.get("logprobs") is not None:
            tokens = content.split() or [""]
            lps = record["logprobs"]
            choice["logprobs"] = {
                "content": [
                    {"token": tokens[i % len(tokens)], "logprob": lp, "bytes": None, "top_logprobs": []}
                    for i, lp in enumerate(lps)
                ]
            }
        data = {
            "id": f"rec-{self.calls[model]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [choice],
            "usage": usage,
        }
        if body.get("stream"):
            return StreamingResponse(self._stream(data, body), media_type="text/event-stream")
        return _json(data)

    async def _stream(self, data: dict[str, Any], body: dict[str, Any]):
        base = {k: data[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
        choice = data["choices"][0]
        for word in choice["message"]["content"].split(" "):
            delta = {"index": 0, "delta": {"content": word + " "}, "finish_reason": None}
            yield b"data: " + orjson.dumps({**base, "choices": [delta]}) + b"\n\n"
        end = {"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}
        yield b"data: " + orjson.dumps({**base, "choices": [end]}) + b"\n\n"
        if (body.get("stream_options") or {}).get("include_usage"):
            yield b"data: " + orjson.dumps({**base, "choices": [], "usage": data["usage"]}) + b"\n\n"
        yield b"data: [DONE]\n\n"

    async def stats(self, _request: Request) -> Response:
        return _json(dict(self.calls))

    async def reset(self, _request: Request) -> Response:
        self.calls.clear()
        return _json({})


def create_recorded_app(answers_path: str | Path) -> Starlette:
    fake = RecordedUpstream(load_answers(Path(answers_path)))
    return Starlette(
        routes=[
            Route("/v1/chat/completions", fake.chat, methods=["POST"]),
            Route("/_stats", fake.stats),
            Route("/_reset", fake.reset, methods=["POST"]),
        ]
    )


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", required=True, help="JSONL of recorded answers")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9100)
    args = parser.parse_args()
    uvicorn.run(
        create_recorded_app(args.answers),
        host=args.host,
        port=args.port,
        log_level="warning",
        access_log=False,
        loop="uvloop",
        http="httptools",
    )


if __name__ == "__main__":
    main()
