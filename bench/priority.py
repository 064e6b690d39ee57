"""Interactive latency while a batch backlog runs, with the batch lane's admission on vs off.

Two simulated replicas of one model (in process, through httpx.MockTransport and the real
ReplicaSet + OpenAIProvider code): each serves at most `--slots` requests at a time, first come
first served (an upstream with no priority scheduling of its own), and takes `--ms-per-token`
per output token. At t=0 a backlog of batch-class requests arrives; interactive requests then
arrive at a steady rate. Baseline: admission off (batch requests go straight in, like any
other). Measured: admission on (the defaults: batch starts only while no foreground request is
in flight, and holds at most `batch_max_tokens` per replica; a FIFO upstream wants that cap
near its slots x a batch request's weight, e.g. `--batch-max-tokens 1100` here).

    python bench/priority.py [--batch 200] [--interactive 100] [--slots 4] [--batch-max-tokens N]

Prints interactive p50/p95 latency and the batch backlog's makespan for both, and the ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections import defaultdict

import httpx
import orjson

from engine.admission import AdmissionPolicy, Priority
from gateway.core.context import Endpoint
from gateway.providers.base import UpstreamCall
from gateway.providers.openai_compatible import OpenAIProvider
from gateway.providers.replicas import ReplicaSet


def simulated_upstreams(slots: int, ms_per_token: float) -> httpx.MockTransport:
    gates: dict[str, asyncio.Semaphore] = defaultdict(lambda: asyncio.Semaphore(slots))

    async def handle(request: httpx.Request) -> httpx.Response:
        body = orjson.loads(request.content)
        async with gates[request.url.host]:
            await asyncio.sleep(body["max_tokens"] * ms_per_token / 1000)
        return httpx.Response(
            200,
            json={
                "id": "x",
                "object": "chat.completion",
                "model": body["model"],
                "created": 0,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
                "usage": {
                    "prompt_tokens": 8,
                    "completion_tokens": body["max_tokens"],
                    "total_tokens": 8 + body["max_tokens"],
                },
            },
        )

    return httpx.MockTransport(handle)


def call(priority: Priority, max_tokens: int) -> UpstreamCall:
    return UpstreamCall(
        Endpoint.CHAT,
        {"model": "m", "max_tokens": max_tokens, "messages": [{"role": "user", "content": "a short question"}]},
        priority=priority,
    )


async def scenario(args: argparse.Namespace, admission: bool) -> dict[str, float]:
    transport = simulated_upstreams(args.slots, args.ms_per_token)
    replicas = [
        OpenAIProvider(f"r{i}", f"http://r{i}.sim/v1", None, max_retries=0, transport=transport)
        for i in range(args.replicas)
    ]
    policy = (
        AdmissionPolicy(args.batch_idle_tokens, args.batch_max_tokens)
        if admission
        else AdmissionPolicy(batch_idle_tokens=10**12, batch_max_tokens=None)
    )
    rs = ReplicaSet("m", replicas, policy, max_output_tokens=4096, batch_max_wait_s=3600)
    start = time.perf_counter()

    async def batch_one() -> float:
        await rs.complete(call(Priority.BATCH, args.batch_tokens))
        return time.perf_counter() - start

    async def interactive_one(delay: float) -> float:
        await asyncio.sleep(delay)
        t0 = time.perf_counter()
        await rs.complete(call(Priority.INTERACTIVE, args.interactive_tokens))
        return time.perf_counter() - t0

    batch = [asyncio.create_task(batch_one()) for _ in range(args.batch)]
    interactive = [asyncio.create_task(interactive_one(i * args.gap_ms / 1000)) for i in range(args.interactive)]
    latencies = sorted(await asyncio.gather(*interactive))
    makespan = max(await asyncio.gather(*batch))
    await rs.aclose()
    return {
        "p50_ms": statistics.median(latencies) * 1000,
        "p95_ms": latencies[int(0.95 * (len(latencies) - 1))] * 1000,
        "batch_makespan_s": makespan,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--slots", type=int, default=4, help="concurrent requests per replica")
    parser.add_argument("--ms-per-token", type=float, default=0.2)
    parser.add_argument("--batch", type=int, default=200, help="batch requests queued at t=0")
    parser.add_argument("--batch-tokens", type=int, default=256)
    parser.add_argument("--interactive", type=int, default=100)
    parser.add_argument("--interactive-tokens", type=int, default=64)
    parser.add_argument("--gap-ms", type=float, default=20.0, help="between interactive arrivals")
    parser.add_argument("--batch-idle-tokens", type=int, default=0, help="admission: foreground level")
    parser.add_argument("--batch-max-tokens", type=int, default=16_384, help="admission: batch cap per replica")
    args = parser.parse_args()
    alone = args.interactive_tokens * args.ms_per_token
    print(
        f"{args.replicas} replicas x {args.slots} slots, {args.ms_per_token} ms/token; "
        f"{args.batch} batch x {args.batch_tokens} tokens at t=0, {args.interactive} interactive x "
        f"{args.interactive_tokens} tokens every {args.gap_ms} ms (alone: {alone:.1f} ms each); admission: "
        f"batch_idle_tokens {args.batch_idle_tokens}, batch_max_tokens {args.batch_max_tokens}"
    )
    off = asyncio.run(scenario(args, admission=False))
    on = asyncio.run(scenario(args, admission=True))
    for name, r in (("baseline: admission off", off), ("admission on", on)):
        print(
            f"{name:24s} interactive p50 {r['p50_ms']:8.1f} ms  p95 {r['p95_ms']:8.1f} ms  "
            f"batch makespan {r['batch_makespan_s']:6.2f} s"
        )
    print(
        f"interactive p50 {off['p50_ms'] / on['p50_ms']:.1f}x lower, p95 {off['p95_ms'] / on['p95_ms']:.1f}x lower; "
        f"batch makespan {on['batch_makespan_s'] / off['batch_makespan_s']:.2f}x the baseline's"
    )


if __name__ == "__main__":
    main()
