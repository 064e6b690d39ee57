"""CPU a request costs in process, a streamed answer against a whole one (the baseline, in the
same run): the app over an httpx.MockTransport upstream that answers at once (a stream's chunks
all in one read, no wait between them), the client over httpx's ASGI transport, caches off.
The figures include the client's and the mock's own CPU; the ratio is what to read. Set beside
`bench/overhead.py --stream-only` (where a stream's chunks come 20 ms apart), it says how much
of a stream's CPU there comes from its waits rather than its work (issue 28).

    python -m bench.stream_cpu [--requests 300] [--tokens 8] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import orjson

from gateway.app import create_app
from gateway.config.settings import Settings
from gateway.service import Gateway

ROUTE = "/v1/chat/completions"


def upstream(tokens: int) -> Callable[[httpx.Request], httpx.Response]:
    def chunk(delta: dict, finish: str | None = None, usage: dict | None = None) -> str:
        data = {"id": "x", "object": "chat.completion.chunk", "model": "m", "created": 0,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}  # fmt: skip
        if usage is not None:
            data["usage"] = usage
        return f"data: {orjson.dumps(data).decode()}\n\n"

    usage = {"prompt_tokens": 9, "completion_tokens": tokens, "total_tokens": 9 + tokens}

    def answer(request: httpx.Request) -> httpx.Response:
        if orjson.loads(request.content).get("stream"):
            events = [chunk({"content": f" tok{i}"}) for i in range(tokens)]
            text = "".join(events) + chunk({}, "stop", usage) + "data: [DONE]\n\n"
            return httpx.Response(200, text=text, headers={"content-type": "text/event-stream"})
        message = {"role": "assistant", "content": "".join(f" tok{i}" for i in range(tokens))}
        return httpx.Response(
            200,
            json={"id": "x", "object": "chat.completion", "model": "m", "created": 0, "usage": usage,
                  "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]},
        )  # fmt: skip

    return answer


async def cpu_per_request(requests: int, tokens: int, rounds: int) -> dict[str, list[float]]:
    work = Path(tempfile.mkdtemp())
    settings = Settings.model_validate(
        {
            "admin_key": "sk-cg-admin-stream-cpu",
            "database_url": f"sqlite:///{work}/db.sqlite",
            "data_dir": str(work / "data"),
            "cache": {"exact": {"enabled": False}, "semantic": {"enabled": False}},
            "models": [{"name": "m", "provider": "openai", "api_base": "http://upstream.test/v1",
                        "price": {"input_per_mtok": "0.1", "output_per_mtok": "0.5"}}],
        }
    )  # fmt: skip
    app = create_app(settings, transport=httpx.MockTransport(upstream(tokens)))
    gateway: Gateway = app.state.gateway
    await gateway.start()
    await gateway.keys.create_team("t")
    _, secret = await gateway.keys.create_key("t")
    found: dict[str, list[float]] = {"whole": [], "stream": []}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw.test") as http:

        async def ask(i: int, stream: bool) -> None:
            body = {"model": "m", "stream": stream, "messages": [{"role": "user", "content": f"question {i}"}]}
            response = await http.post(ROUTE, json=body, headers={"authorization": f"Bearer {secret}"})
            response.raise_for_status()
            await response.aread()

        for i in range(20):  # warm-up, both kinds
            await ask(i, i % 2 == 0)
        for _ in range(rounds):  # alternated, so a drift of the machine hits both
            for kind in ("whole", "stream"):
                started = time.process_time()
                for i in range(requests):
                    await ask(i, kind == "stream")
                found[kind].append((time.process_time() - started) / requests * 1e3)
    await gateway.stop()
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300, help="requests of each kind a round")
    parser.add_argument("--tokens", type=int, default=8, help="content chunks a streamed answer has")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    found = asyncio.run(cpu_per_request(args.requests, args.tokens, args.rounds))
    whole, stream = statistics.median(found["whole"]), statistics.median(found["stream"])
    rounds = ", ".join(f"{w:.2f} / {s:.2f}" for w, s in zip(found["whole"], found["stream"]))
    print(f"CPU a request in process (client and mock included), medians of {args.rounds} rounds:")
    print(f"  whole answer {whole:.2f} ms, streamed ({args.tokens} chunks) {stream:.2f} ms: {stream / whole:.2f}x")
    print(f"  rounds (whole / streamed): {rounds}")


if __name__ == "__main__":
    main()
