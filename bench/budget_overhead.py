"""Issue 3's speed benchmark: what the rate-limit and budget stages add to a request.

Measured directly on the stages (the real `RateLimit` and `ReserveBudget` objects, the real
`SpendControl`, the real Redis), per request, in one run:

- baseline: the same two stages for an enterprise key with no budget and no limits — they
  decide there is nothing to count and make no store call;
- memory: a pro key with key and team rate limits (requests and tokens per minute, the daily
  token quota) and three budgets (team monthly, key daily, tag weekly), in-process counters;
- redis: the same with the Redis backend: the admission (every limit and every budget) is one
  Lua call, the settlement another.

Runs on uvloop, as `costgate serve` does. The three runs are interleaved over `--rounds`
rounds (the machine is shared, its load moves) and each figure is the median over rounds; a
plain Redis PING is timed in the same rounds as the floor of any round trip.

Reported: p50 / p99 of the admission (the check: RateLimit + ReserveBudget.__call__, which
includes the worst-case estimate with tiktoken) and of the settlement, the added p50 of
admission + settlement over the baseline, and where the time goes: this process's CPU time per
request and Redis's own time in the two scripts (INFO commandstats) — on a loaded machine the
wall times are mostly waiting for a core. Sequential requests (latency, not throughput).

    .venv/bin/python bench/budget_overhead.py [--requests 1000] [--rounds 3] [--redis redis://127.0.0.1:6379/5]
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repo, ahead of bench/engine.py

import redis as redis_sync
import uvloop
from prometheus_client import CollectorRegistry
from redis.asyncio import Redis

from gateway.config.models_config import ModelConfig
from gateway.config.settings import Settings
from gateway.core.asked import Asked
from gateway.core.context import Endpoint, Principal, RequestContext
from gateway.metrics import Metrics
from gateway.routing.direct import DirectTarget
from gateway.spend.spend_control import SpendControl
from gateway.stages.budget import ReserveBudget
from gateway.stages.ratelimit import RateLimit
from gateway.storage.db import create_engine, create_tables
from gateway.storage.ledger import LedgerWriter
from gateway.upstream.deployments import build_deployments
from policies.breaker import Breakers
from policies.budgets import Budget, Period, Scope
from policies.pricing import Bill, Usage, to_pico

BODY = {
    "model": "small",
    "max_tokens": 256,
    "messages": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Summarise the causes of the French revolution in three sentences."},
    ],
}


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


async def measure(
    settings: Settings, plan: str, budgets: bool, n: int, workdir: Path
) -> tuple[list[float], list[float], list[float]]:
    engine = create_engine(f"sqlite:///{workdir}/{secrets.token_hex(4)}.db")
    await create_tables(engine)
    ledger = LedgerWriter(engine)
    control = SpendControl(settings, engine, ledger, CollectorRegistry())
    model = ModelConfig(
        name="small",
        api_base="http://127.0.0.1:9/v1",
        api_key="x",
        price={"input_per_mtok": "0.15", "output_per_mtok": "0.6"},
    )
    deployments = build_deployments([model])
    targets = {"small": DirectTarget(deployments["small"], deployments, Metrics(), Breakers(settings.breaker))}
    principal = Principal("team_bench", "bench", "key_bench", plan=plan)
    if budgets:
        for b in (
            Budget(Scope.TEAM, "team_bench", Period.MONTHLY, to_pico(Decimal(10**6))),
            Budget(Scope.KEY, "key_bench", Period.DAILY, to_pico(Decimal(10**5))),
            Budget(Scope.TAG, "proj=bench", Period.WEEKLY, to_pico(Decimal(10**5))),
        ):
            await control.table.put(b)
    limit, reserve = RateLimit(control, deployments), ReserveBudget(control, targets)
    admit_times, settle_times, cpu_times = [], [], []
    for i in range(n + 100):  # the first 100 warm up (seeding, script load, connections)
        ctx = RequestContext(
            request_id=f"r{i}",
            endpoint=Endpoint.CHAT,
            body=BODY,
            api_key=None,
            headers={},
            principal=principal,
            asked=Asked("small", tags=("proj=bench",)),
        )
        c0, t0 = time.thread_time(), time.perf_counter()
        await limit(ctx)
        await reserve(ctx)
        t1 = time.perf_counter()
        ctx.meter.add_call("small", Usage(20, 60), Bill(Decimal("0.0000393")))
        t2 = time.perf_counter()
        await reserve.settle(ctx)
        t3, c3 = time.perf_counter(), time.thread_time()
        if i >= 100:
            admit_times.append((t1 - t0) * 1000)
            settle_times.append((t3 - t2) * 1000)
            cpu_times.append((c3 - c0) * 1000)
    await control.stop()
    await engine.dispose()
    return admit_times, settle_times, cpu_times


def server_usec(url: str) -> tuple[int, int]:
    """(microseconds, calls) Redis spent in EVALSHA so far."""
    stats = redis_sync.Redis.from_url(url).info("commandstats").get("cmdstat_evalsha", {})
    return int(stats.get("usec", 0)), int(stats.get("calls", 0))


async def ping_times(url: str, n: int) -> list[float]:
    client = Redis.from_url(url)
    times = []
    for i in range(n + 100):
        t0 = time.perf_counter()
        await client.ping()
        if i >= 100:
            times.append((time.perf_counter() - t0) * 1000)
    await client.aclose()
    return times


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/5")
    args = parser.parse_args()
    prefix = f"cgbench:{secrets.token_hex(4)}:"
    limits = {"team": {"requests_per_minute": 10**7, "tokens_per_minute": 10**10}}
    plans = {"pro": {"requests_per_minute": 10**7, "tokens_per_minute": 10**10, "tokens_per_day": 10**12}}
    runs = {
        "baseline (no budget, no limit)": (
            Settings(budgets={"backend": "memory", "refresh_s": 3600}),
            "enterprise",
            False,
        ),
        "memory: 5 limits + 3 budgets": (
            Settings(budgets={"backend": "memory", "refresh_s": 3600}, rate_limits=limits, plans=plans),
            "pro",
            True,
        ),
        "redis: 5 limits + 3 budgets": (
            Settings(
                redis_url=args.redis,
                budgets={"backend": "redis", "refresh_s": 3600, "redis_prefix": prefix},
                rate_limits=limits,
                plans=plans,
            ),
            "pro",
            True,
        ),
    }
    rows: dict[str, list[tuple[float, float, float, float, float]]] = {name: [] for name in runs}
    pings: list[float] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for _round in range(args.rounds):
                pings.append(statistics.median(await ping_times(args.redis, args.requests)))
                base = 0.0
                for name, (settings, plan, with_budgets) in runs.items():
                    before = server_usec(args.redis)
                    admit, settle, cpu = await measure(settings, plan, with_budgets, args.requests, Path(tmp))
                    after = server_usec(args.redis)
                    server = (after[0] - before[0]) / max(1, after[1] - before[1]) / 1000 * 2 if "redis" in name else 0
                    total = statistics.median([a + s for a, s in zip(admit, settle)])
                    if name.startswith("baseline"):
                        base = total
                    rows[name].append(
                        (
                            statistics.median(admit),
                            pct(admit, 0.99),
                            statistics.median(settle),
                            pct(settle, 0.99),
                            total - base,
                            statistics.median(cpu),
                            server,
                        )
                    )
    finally:
        client = redis_sync.Redis.from_url(args.redis)
        keys = list(client.scan_iter(match=prefix + "*", count=1000))
        if keys:
            client.delete(*keys)
    print(f"{args.requests} sequential requests per run, {args.rounds} rounds, medians over rounds; ms per request")
    print(f"redis PING p50 (round-trip floor): {statistics.median(pings):.3f}")
    print(
        f"{'run':32} {'admit p50':>9} {'admit p99':>9} {'settle p50':>10} {'settle p99':>10} {'added p50':>9} "
        f"{'cpu p50':>8} {'redis cpu':>9}"
    )
    for name, values in rows.items():
        c = [statistics.median(v[i] for v in values) for i in range(7)]
        print(f"{name:32} {c[0]:9.3f} {c[1]:9.3f} {c[2]:10.3f} {c[3]:10.3f} {c[4]:9.3f} {c[5]:8.3f} {c[6]:9.3f}")
    print("cpu p50: this process's CPU time for admit + settle; redis cpu: the server's time in the two scripts")


if __name__ == "__main__":
    uvloop.run(main())
