"""A stand-in for vLLM's OpenAI server, for the supervisor tests: it takes vLLM's command line,
answers `/health`, `/metrics` (vLLM's counter names) and `/v1/completions`, and starts in a
blink, so the launcher's restart and idle-shutdown paths run without paying for real engine
starts. (The real engine is exercised once, in test_engine_e2e.py.)"""

from __future__ import annotations

import argparse
import os

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route


def create_app(served: str) -> Starlette:
    counts = {"prompt": 0, "generation": 0}

    async def health(_request: Request) -> PlainTextResponse:
        return PlainTextResponse("")

    async def metrics(_request: Request) -> PlainTextResponse:
        label = f'{{engine="0",model_name="{served}"}}'
        return PlainTextResponse(
            "# TYPE vllm:prompt_tokens_total counter\n"
            f"vllm:prompt_tokens_total{label} {counts['prompt']}\n"
            "# TYPE vllm:generation_tokens_total counter\n"
            f"vllm:generation_tokens_total{label} {counts['generation']}\n"
            "# TYPE vllm:num_requests_running gauge\n"
            f"vllm:num_requests_running{label} 0\n")

    async def completions(request: Request) -> JSONResponse:
        body = await request.json()
        if body.get("prompt") == "die":
            os._exit(3)  # a crash: the process is gone mid-request
        counts["prompt"] += 1
        counts["generation"] += body.get("max_tokens", 1)
        return JSONResponse({"id": "cmpl-1", "object": "text_completion", "model": served,
                             "choices": [{"index": 0, "text": f"pid {os.getpid()}", "finish_reason": "stop"}],
                             "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}})

    return Starlette(routes=[Route("/health", health), Route("/metrics", metrics),
                             Route("/v1/completions", completions, methods=["POST"])])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--served-model-name", required=True)
    args, _vllm_flags = parser.parse_known_args()
    uvicorn.run(create_app(args.served_model_name), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
