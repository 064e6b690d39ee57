"""A stand-in for vLLM's OpenAI server, for the supervisor and gateway tests: it takes vLLM's
command line, answers `/health`, `/metrics` (vLLM's counter names), `/v1/models` (with the
`max_model_len` it was started with), `/v1/completions` and `/v1/chat/completions`, and starts
in a blink, so the launcher's restart, idle-shutdown and cold-start paths run without paying
for real engine starts. (The real engine is exercised once, in test_engine_e2e.py.)

Its own flags: `--stand-in-ready-file PATH` keeps `/health` at 503 until PATH exists, so a
test decides exactly when a start finishes. It prints its command line first, into the
engine's log, so tests can read the flags the launcher chose."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route

from engine.model_facts import read_checkpoint

USAGE = {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}


def create_app(served: str, max_model_len: int, tools: bool, ready_file: Path | None) -> Starlette:
    counts = {"prompt": 0, "generation": 0}

    async def health(_request: Request) -> PlainTextResponse:
        ready = ready_file is None or ready_file.exists()
        return PlainTextResponse("", status_code=200 if ready else 503)

    async def metrics(_request: Request) -> PlainTextResponse:
        label = f'{{engine="0",model_name="{served}"}}'
        return PlainTextResponse(
            "# TYPE vllm:prompt_tokens_total counter\n"
            f"vllm:prompt_tokens_total{label} {counts['prompt']}\n"
            "# TYPE vllm:generation_tokens_total counter\n"
            f"vllm:generation_tokens_total{label} {counts['generation']}\n"
            "# TYPE vllm:num_requests_running gauge\n"
            f"vllm:num_requests_running{label} 0\n"
        )

    async def models(_request: Request) -> JSONResponse:
        return JSONResponse(
            {"object": "list", "data": [{"id": served, "object": "model", "max_model_len": max_model_len}]}
        )

    async def completions(request: Request) -> JSONResponse:
        body = await request.json()
        if body.get("prompt") == "die":
            os._exit(3)  # a crash: the process is gone mid-request
        counts["prompt"] += 1
        counts["generation"] += body.get("max_tokens", 1)
        return JSONResponse(
            {
                "id": "cmpl-1",
                "object": "text_completion",
                "model": served,
                "choices": [{"index": 0, "text": f"pid {os.getpid()}", "finish_reason": "stop"}],
                "usage": USAGE,
            }
        )

    async def chat(request: Request) -> JSONResponse:
        body = await request.json()
        if body.get("tools") and not tools:  # what vLLM answers without a tool parser
            return JSONResponse(
                {
                    "error": {
                        "message": '"auto" tool choice requires --enable-auto-tool-choice and '
                        "--tool-call-parser to be set",
                        "type": "BadRequestError",
                        "code": 400,
                    }
                },
                status_code=400,
            )
        counts["prompt"] += 1
        counts["generation"] += 2
        return JSONResponse(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "model": served,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": f"pid {os.getpid()}"},
                        "finish_reason": "stop",
                    }
                ],
                "usage": USAGE,
            }
        )

    return Starlette(
        routes=[
            Route("/health", health),
            Route("/metrics", metrics),
            Route("/v1/models", models),
            Route("/v1/completions", completions, methods=["POST"]),
            Route("/v1/chat/completions", chat, methods=["POST"]),
        ]
    )


def main() -> None:
    print("stand-in vLLM:", " ".join(sys.argv[1:]), flush=True)
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model", default="")
    parser.add_argument("--served-model-name", required=True)
    parser.add_argument("--max-model-len", default="auto")
    parser.add_argument("--enable-auto-tool-choice", action="store_true")
    parser.add_argument("--stand-in-ready-file", type=Path)
    args, _vllm_flags = parser.parse_known_args()
    own = read_checkpoint(Path(args.model)).context_length or 2048  # vLLM's default when a config says nothing
    length = own if args.max_model_len == "auto" else int(args.max_model_len)
    uvicorn.run(
        create_app(args.served_model_name, length, args.enable_auto_tool_choice, args.stand_in_ready_file),
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
    )


if __name__ == "__main__":
    main()
