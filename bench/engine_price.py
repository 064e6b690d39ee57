"""How far apart similar requests to the local engine are priced: the moving throughput
estimate (engine/throughput.py) against the per-window estimate it replaced, on one run.

    python bench/engine_price.py [--model DIR] [--requests 40] [--max-tokens 24] [--seed 1]

Starts vLLM on the model through the launcher (engine/launcher.py, as the gateway does), sends
`--requests` identical greedy chats (so every answer has the same usage) one after another with
random idle gaps of 0-4 s and a few bursts of three at once, and scrapes vLLM's counters every
2 s, as the supervisor does. Then both estimators are fed the same scrapes, and each request is
priced at the estimate in force when it ended: the spread is max/min of those prices (all
requests, and those after the first measurement), per token, so answers of different lengths
compare. `--model` defaults to the checkpoint
`costgate serve` prepares; `gpu_hour_usd` is the default model's $0.10.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.command import LaunchSpec  # noqa: E402
from engine.config import EngineSettings  # noqa: E402
from engine.cost import Counters, ThroughputMeter, price_per_token  # noqa: E402
from engine.health import scrape  # noqa: E402
from engine.launcher import Replica  # noqa: E402

GPU_HOUR = Decimal("0.10")
SCRAPE_S = 2.0


class WindowMeter:
    """The estimate before issue 14 (item 11): each busy window's rate, the first at full weight,
    then an EWMA of weight 0.3 — the baseline."""

    def __init__(self, prior: float) -> None:
        self.rate, self.measured, self._last = prior, False, None

    def observe(self, now: Counters) -> None:
        last, self._last = self._last, now
        if last is None or now.generation_tokens <= last.generation_tokens:
            return
        window = (now.generation_tokens - last.generation_tokens) / (now.at - last.at)
        weight = 0.3 if self.measured else 1.0
        self.rate, self.measured = (1 - weight) * self.rate + weight * window, True


@dataclass(frozen=True)
class Done:
    at: float
    completion_tokens: int


async def run(args: argparse.Namespace) -> tuple[list[Counters], list[Done]]:
    settings = EngineSettings.parse(
        {"gpu_hour_usd": str(GPU_HOUR), "idle_shutdown_s": None, "log_dir": str(Path(args.log_dir))}
    )
    replica = Replica(LaunchSpec("bench", args.model, settings), Path(args.log_dir), cpu=True)
    began = time.monotonic()
    url = await replica.ensure_ready()
    print(f"engine ready in {time.monotonic() - began:.0f} s (max_model_len {replica.max_model_len})", flush=True)
    scrapes: list[Counters] = []
    done: list[Done] = []
    rng = random.Random(args.seed)
    async with httpx.AsyncClient(base_url=url, timeout=300) as client:

        async def scraper() -> None:
            while True:
                stats = await scrape(client, time.monotonic())
                if stats is not None:
                    scrapes.append(stats.counters)
                await asyncio.sleep(SCRAPE_S)

        async def one() -> None:
            response = await client.post(
                "/v1/chat/completions",
                json={
                    "model": "bench",
                    "messages": [{"role": "user", "content": "Name four planets."}],
                    "max_tokens": args.max_tokens,
                    "temperature": 0,
                },
            )
            done.append(Done(time.monotonic(), response.json()["usage"]["completion_tokens"]))

        task = asyncio.create_task(scraper())
        sent = 0
        while sent < args.requests:
            burst = 3 if rng.random() < 0.15 else 1
            await asyncio.gather(*(one() for _ in range(min(burst, args.requests - sent))))
            sent += burst
            await asyncio.sleep(rng.uniform(0, 4))
        await asyncio.sleep(SCRAPE_S * 1.5)  # a last scrape after the last answer
        task.cancel()
    await replica.stop()
    return scrapes, done


def prices(meter_observe, rate, scrapes: list[Counters], done: list[Done]) -> tuple[list[Decimal], int]:
    """The output price per token in force at each request's end (what its completion tokens are
    charged at: the answers' lengths differ a little, the price should not); and how many were
    priced at the prior."""
    out, prior_priced, i = [], 0, 0
    for request in sorted(done, key=lambda d: d.at):
        while i < len(scrapes) and scrapes[i].at <= request.at:
            meter_observe(scrapes[i])
            i += 1
        tps, measured = rate()
        prior_priced += not measured
        out.append(price_per_token(GPU_HOUR, tps))
    return out, prior_priced


def spread(values: list[Decimal]) -> str:
    if not values:
        return "n/a"
    floats = [float(v) for v in values]
    cv = statistics.pstdev(floats) / statistics.fmean(floats)
    return f"max/min {max(floats) / min(floats):.2f}x, coefficient of variation {cv:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="costgate-data/models/SmolLM2-135M-Instruct")
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--max-tokens", type=int, default=24)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--log-dir", default="/tmp/costgate-bench-engine-price")
    args = parser.parse_args()
    scrapes, done = asyncio.run(run(args))
    tokens = {d.completion_tokens for d in done}
    print(f"{len(done)} requests, completion tokens {sorted(tokens)}, {len(scrapes)} scrapes")
    old = WindowMeter(EngineSettings().tokens_per_second)
    new = ThroughputMeter(EngineSettings().cost)
    for name, observe, rate in (
        ("per-window (before)", old.observe, lambda: (old.rate, old.measured)),
        ("moving estimate (now)", new.observe, lambda: (new.output_tps, new.measured)),
    ):
        values, at_prior = prices(observe, rate, scrapes, done)
        measured = values[at_prior:]
        print(
            f"{name}: all {spread(values)}; after the first measurement ({len(measured)}) {spread(measured)}; "
            f"final {rate()[0]:.1f} tok/s"
        )


if __name__ == "__main__":
    main()
