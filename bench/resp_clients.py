"""The hand-written RESP channel (gateway/storage/resp.py) against redis-py's asyncio client.

    python bench/resp_clients.py [--calls 500] [--rounds 5] [--concurrency 32] [--redis redis://127.0.0.1:6379/5]

Issue 25 asks whether redis-py (with hiredis, installed: it parses for both) meets the figures of
the hand-written channel, which carries the two calls on every request's path: the budget and
rate-limit admission and the settlement (one EVALSHA each, RedisStore.admit / settle). The
real `RedisStore` runs them against the real Redis under a private key prefix (deleted after),
with its `_fast` channel swapped between the two clients round by round:
- resp.py: the `ScriptChannel` RedisStore builds;
- redis-py: the store's own redis-py client (its BlockingConnectionPool with one retry, as for
  every other call), EVALSHA with the same script and arguments;
- redis-py plain: `Redis.from_url` with its defaults (a plain ConnectionPool, no retry), the
  cheapest redis-py setup, to tell the client's cost from the store's pool configuration.
Also timed on both: an HGET of a 2 KB cache entry (the response cache's hit) and a SET.

Sequential calls: p50 wall latency, and this process's CPU per call (process_time: the client's
own work, as Redis runs in another process). Concurrent: `--concurrency` requests (admit then
settle) at once, CPU per call (resp.py pipelines them on one socket, redis-py spreads them over
pooled connections). Rounds alternate the clients (the machine is shared, its load moves); each
figure is the median over rounds, with its ratio redis-py / resp.py. Runs on uvloop, as
`costgate serve` does.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis
import uvloop
from redis.exceptions import NoScriptError

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gateway.storage.counters import Admission, BudgetCheck, Settlement  # noqa: E402
from gateway.storage.redis_counters import RedisStore  # noqa: E402
from gateway.storage.resp import Arg, Script  # noqa: E402
from policies.rate_limits import Limit, RateCheck  # noqa: E402

CALLS = ("admit", "settle", "HGET 2 KB", "SET 2 KB")


class RedisPyChannel:
    """`ScriptChannel`'s two calls over a redis-py client."""

    def __init__(self, client: aioredis.Redis) -> None:
        self.client = client

    async def call(self, *args: Arg) -> object:
        return await self.client.execute_command(*args)

    async def run(self, script: Script, keys: list[str], args: list[Arg]) -> object:
        try:
            return await self.client.evalsha(script.sha.decode(), len(keys), *keys, *args)
        except NoScriptError:
            return await self.client.eval(script.source, len(keys), *keys, *args)


class Workload:
    """Admissions against two budgets and a rate limit, as a pro key's request makes."""

    def __init__(self, store: RedisStore) -> None:
        self.store = store
        now = time.time()
        self.budgets = (BudgetCheck("team:bench:monthly", 10**15, 3600), BudgetCheck("key:bench:daily", 10**15, 3600))
        self.rates = (RateCheck(Limit.REQUESTS_PER_MINUTE, "key:bench", 10**9, 1),)
        self.entry_key = store.prefix + "entry"
        self.seeds = {b.counter: (0, b.ttl_s) for b in self.budgets}
        self.started = now

    async def admit(self, rid: str) -> None:
        now = time.time()
        await self.store.admit(Admission(rid, now, now + 60, 1000, self.rates, self.budgets))

    async def settle(self, rid: str) -> None:
        budgets = tuple(b.counter for b in self.budgets)
        await self.store.settle(Settlement(rid, time.time(), 900, budgets))


async def sequential(work: Workload, channel: Any, calls: int) -> dict[str, tuple[float, float]]:
    """Per call type: (p50 wall, mean CPU) in seconds."""
    work.store._fast = channel
    entry = secrets.token_bytes(2048)
    steps: dict[str, Callable[[str], Awaitable[object]]] = {
        "admit": work.admit,
        "settle": work.settle,
        "HGET 2 KB": lambda _rid: channel.call("HGET", work.entry_key, "entry"),
        "SET 2 KB": lambda _rid: channel.call("SET", work.store.prefix + "set", entry),
    }
    await channel.call("HSET", work.entry_key, "entry", entry)
    walls: dict[str, list[float]] = {name: [] for name in steps}
    cpus: dict[str, float] = dict.fromkeys(steps, 0.0)
    for _ in range(calls):
        rid = secrets.token_hex(8)
        for name, step in steps.items():
            cpu, wall = time.process_time(), time.perf_counter()
            await step(rid)
            walls[name].append(time.perf_counter() - wall)
            cpus[name] += time.process_time() - cpu
    return {name: (statistics.median(walls[name]), cpus[name] / calls) for name in steps}


async def concurrent(work: Workload, channel: Any, calls: int, width: int) -> float:
    """CPU per call (admit or settle) with `width` requests in flight."""
    work.store._fast = channel

    async def request() -> None:
        rid = secrets.token_hex(8)
        await work.admit(rid)
        await work.settle(rid)

    cpu = time.process_time()
    for _ in range(max(1, calls // width)):
        await asyncio.gather(*(request() for _ in range(width)))
    return (time.process_time() - cpu) / (2 * width * max(1, calls // width))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/5")
    args = parser.parse_args()

    prefix = f"bench:resp:{secrets.token_hex(4)}:"
    store = RedisStore(args.redis, prefix)
    hand, library = store._fast, RedisPyChannel(store.redis)
    plain = aioredis.Redis.from_url(args.redis)
    clients: dict[str, Any] = {"resp.py": hand, "redis-py": library, "redis-py plain": RedisPyChannel(plain)}
    work = Workload(store)
    await store.initialize(work.seeds)
    seq: dict[str, list[dict[str, tuple[float, float]]]] = {name: [] for name in clients}
    wide: dict[str, list[float]] = {name: [] for name in clients}
    try:
        for channel in clients.values():  # warm: scripts loaded, connections open
            await sequential(work, channel, 20)
        for n in range(args.rounds):
            order = list(clients.items())
            order = order[n % len(order) :] + order[: n % len(order)]  # each client first in turn
            for name, channel in order:
                seq[name].append(await sequential(work, channel, args.calls))
                wide[name].append(await concurrent(work, channel, args.calls, args.concurrency))
    finally:
        await cleanup(store, prefix)
        store._fast = hand
        await store.close()
        await plain.aclose()
    report(seq, wide, args)


def report(seq: dict[str, list[dict[str, tuple[float, float]]]], wide: dict[str, list[float]], args: Any) -> None:
    def median(name: str, call: str, part: int) -> float:
        return statistics.median(r[call][part] for r in seq[name]) * 1e6

    others = [name for name in seq if name != "resp.py"]
    print(f"{args.rounds} alternating rounds of {args.calls} sequential calls each; medians over rounds")
    print("(x: the ratio to resp.py in the same rounds)\n")
    print("| call | figure | resp.py | " + " | ".join(others) + " |")
    print("|---|---|---|" + "---|" * len(others))
    for call in CALLS:
        for part, figure in ((0, "p50 wall"), (1, "CPU")):
            base = median("resp.py", call, part)
            cells = [f"{median(n, call, part):.0f} us ({median(n, call, part) / base:.2f}x)" for n in others]
            print(f"| {call} | {figure} | {base:.0f} us | " + " | ".join(cells) + " |")
    base = statistics.median(wide["resp.py"]) * 1e6
    cells = [
        f"{statistics.median(wide[n]) * 1e6:.0f} us ({statistics.median(wide[n]) * 1e6 / base:.2f}x)" for n in others
    ]
    print(
        f"| admit + settle, {args.concurrency} in flight | CPU per call | {base:.0f} us | " + " | ".join(cells) + " |"
    )


async def cleanup(store: RedisStore, prefix: str) -> None:
    keys = [key async for key in store.redis.scan_iter(match=prefix + "*", count=1000)]
    if keys:
        await store.redis.delete(*keys)


if __name__ == "__main__":
    uvloop.run(main())
