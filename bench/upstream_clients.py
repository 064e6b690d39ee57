"""The provider call's own CPU: httpx against aiohttp (gateway/providers/fast_post.py), the two
clients `OpenAIProvider` has, posting the same small chat completion to one local fake upstream
(bench/fast_upstream.py, in its own process so that its CPU is not counted), in one run.

    python bench/upstream_clients.py --requests 3000 --concurrency 8

Prints the client process's CPU per POST (process time, so other load on the machine moves
it less than wall time) and the ratio httpx / aiohttp, alternating rounds so drift hits both.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gateway.providers.fast_post import FastPost  # noqa: E402

BODY = b'{"model":"bench-model","messages":[{"role":"user","content":"Say hi"}],"max_tokens":8}'
HEADERS = {"authorization": "Bearer sk-bench"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def cpu_per_post(post: Callable[[], Awaitable[int]], requests: int, concurrency: int) -> float:
    async def worker(n: int) -> None:
        for _ in range(n):
            assert await post() == 200

    await worker(50)  # connections open, first-call paths warm
    started = time.process_time()
    await asyncio.gather(*(worker(requests // concurrency) for _ in range(concurrency)))
    return (time.process_time() - started) / (requests // concurrency * concurrency)


async def compare(base: str, requests: int, concurrency: int, rounds: int) -> None:
    fast = FastPost(base, HEADERS, timeout_s=30, connect_timeout_s=5)
    client = httpx.AsyncClient(
        base_url=base, headers={**HEADERS, "content-type": "application/json"}, timeout=30, trust_env=False
    )

    async def aiohttp_post() -> int:
        return (await fast.post("/v1/chat/completions", BODY))[0]

    async def httpx_post() -> int:
        return (await client.post("/v1/chat/completions", content=BODY)).status_code

    totals = {"aiohttp": 0.0, "httpx": 0.0}
    for r in range(rounds):
        a = await cpu_per_post(aiohttp_post, requests, concurrency)
        h = await cpu_per_post(httpx_post, requests, concurrency)
        totals["aiohttp"] += a
        totals["httpx"] += h
        print(f"round {r + 1}: aiohttp {a * 1e6:.0f} us, httpx {h * 1e6:.0f} us CPU a POST", flush=True)
    a, h = totals["aiohttp"] / rounds, totals["httpx"] / rounds
    print(f"mean: aiohttp {a * 1e6:.0f} us, httpx {h * 1e6:.0f} us CPU a POST; httpx / aiohttp = {h / a:.2f}")
    await fast.aclose()
    await client.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    port = free_port()
    upstream = subprocess.Popen([sys.executable, str(ROOT / "bench" / "fast_upstream.py"), "--port", str(port)])
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.05)
        asyncio.run(compare(f"http://127.0.0.1:{port}", args.requests, args.concurrency, args.rounds))
    finally:
        upstream.terminate()
        upstream.wait()


if __name__ == "__main__":
    main()
