"""What a token from the local engine costs, in dollars and in grams of CO2: pure functions.

A local model has no price list: its machine costs `gpu_hour_usd` whether it is busy or not,
so a token costs that machine-time divided by how many tokens the machine turns out per
second. The rate is measured from vLLM's own counters (`/metrics`), per model:

- output tokens/s: the growth of `vllm:generation_tokens_total` over scrape windows in which
  the engine generated anything (idle windows say nothing about speed; a window that was
  only partly busy under-counts the rate, so the price errs high, never low);
- prompt tokens/s: the growth of `vllm:prompt_tokens_total` over the growth of the summed
  prefill time (`vllm:request_prefill_time_seconds_sum`).

Both start from configured priors (`tokens_per_second`, `prompt_tokens_per_second`) and move
as engine/throughput.py says: only on a floor of evidence, by a bounded step, so similar
requests get similar prices. `LivePrice` is a `Price`
whose per-token values read the latest measurement, so the ledger, the cost router and
cascades, which all read `deployment.price`, see the measured price without knowing it is one.

Carbon: a call occupies the machine for `prompt / prompt_tps + completion / output_tps`
seconds (the same machine-time the dollars are computed from); that time x `power_watts` x
`grid_g_per_kwh` is its estimate (`carbon_grams`).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Protocol

from engine.throughput import RateEstimate, Smoothing, observe_rate
from policies.pricing import LongContext, OffPeak, Price, Usage

SECONDS_PER_HOUR = Decimal(3600)
JOULES_PER_KWH = 3_600_000.0
FEMTO = Decimal("1e-15")


@dataclass(frozen=True, slots=True)
class CostConfig:
    gpu_hour_usd: Decimal = Decimal("0")  # what the machine costs per hour (0: already paid for)
    tokens_per_second: float = 50.0  # output-rate prior until vLLM's counters say otherwise
    prompt_tokens_per_second: float = 500.0
    power_watts: float = 300.0  # the machine's draw while serving
    grid_g_per_kwh: float = 400.0  # grid carbon intensity (g CO2e / kWh)
    smoothing: Smoothing = Smoothing()  # how the measured rates move (engine/throughput.py)


@dataclass(frozen=True, slots=True)
class Counters:
    """One scrape of vLLM's counters (cumulative since the engine started)."""

    at: float  # monotonic seconds
    prompt_tokens: float
    generation_tokens: float
    prefill_seconds: float
    running: float  # requests running at the scrape (a gauge)
    drafts: float = 0.0  # speculative draft tokens proposed
    accepted: float = 0.0  # of which accepted


def price_per_token(gpu_hour_usd: Decimal, tokens_per_second: float) -> Decimal:
    """(gpu_hour_usd / 3600) / tokens_per_second, as Decimal dollars."""
    if tokens_per_second <= 0:
        raise ValueError("tokens per second must be positive")
    # Rounded to femto-dollars per token: a call's cost then has at most 15 decimals (the ledger
    # keeps pico-dollars per call), instead of Decimal's 28 digits of a repeating fraction.
    return (gpu_hour_usd / SECONDS_PER_HOUR / Decimal(repr(tokens_per_second))).quantize(FEMTO)


def machine_seconds(usage: Usage, prompt_tps: float, output_tps: float) -> float:
    return usage.prompt_tokens / prompt_tps + usage.completion_tokens / output_tps


def carbon_grams(seconds: float, power_watts: float, grid_g_per_kwh: float) -> float:
    """Grams of CO2e for `seconds` of a machine drawing `power_watts` on a grid of given intensity."""
    return power_watts * seconds / JOULES_PER_KWH * grid_g_per_kwh


class ThroughputMeter:
    """Measured prompt and output tokens per second of one model, fed scrape by scrape.
    Survives engine restarts: counters that go backwards start a new baseline."""

    def __init__(self, config: CostConfig) -> None:
        self.config = config
        self.output = RateEstimate(config.tokens_per_second)
        self.prompt = RateEstimate(config.prompt_tokens_per_second)
        self._last: Counters | None = None

    @property
    def output_tps(self) -> float:
        return self.output.rate

    @property
    def prompt_tps(self) -> float:
        return self.prompt.rate

    @property
    def measured(self) -> bool:
        return self.output.measured

    def observe(self, now: Counters) -> None:
        last, self._last = self._last, now
        if last is None or now.generation_tokens < last.generation_tokens or now.at <= last.at:
            return  # first scrape, or the engine restarted and its counters began again
        smoothing = self.config.smoothing
        # Output: tokens generated over the window's wall time (a window only partly busy
        # under-counts the rate, so the price errs high, never low).
        self.output = observe_rate(
            self.output, now.generation_tokens - last.generation_tokens, now.at - last.at, smoothing
        )
        self.prompt = observe_rate(
            self.prompt, now.prompt_tokens - last.prompt_tokens, now.prefill_seconds - last.prefill_seconds, smoothing
        )

    def price(self) -> Price:
        usd = self.config.gpu_hour_usd
        return Price(price_per_token(usd, self.prompt_tps), price_per_token(usd, self.output_tps))

    def carbon(self, usage: Usage) -> float:
        seconds = machine_seconds(usage, self.prompt_tps, self.output_tps)
        return carbon_grams(seconds, self.config.power_watts, self.config.grid_g_per_kwh)


class Priced(Protocol):
    """What a live price reads: the chat engine's meter, or the bundled embedder (engine/embeddings.py)."""

    def price(self) -> Price: ...


class LivePrice(Price):
    """A `Price` that reads the meter each time it is asked: the deployment's price stays one
    object, while its value follows the measured throughput."""

    __slots__ = ("_meter",)
    _meter: Priced

    def __init__(self, meter: Priced) -> None:
        object.__setattr__(self, "_meter", meter)

    @property
    def input(self) -> Decimal:
        return self._meter.price().input

    @property
    def output(self) -> Decimal:
        return self._meter.price().output

    @property
    def cached_input(self) -> Decimal | None:
        return None

    @property
    def reasoning_output(self) -> Decimal | None:
        return None

    @property
    def cache_write(self) -> Decimal | None:
        return None

    @property
    def cache_write_1h(self) -> Decimal | None:
        return None

    @property
    def batch(self) -> Price | None:  # the engine's own lane discount is the batch runner's (docs/batch.md)
        return None

    @property
    def flex(self) -> Price | None:
        return None

    @property
    def priority(self) -> Price | None:
        return None

    @property
    def ultrafast(self) -> Price | None:
        return None

    @property
    def long_context(self) -> tuple[LongContext, ...]:  # the engine prices every prompt length alike
        return ()

    @property
    def premiums(self) -> tuple[tuple[str, Decimal], ...]:  # nor sells a region or a speed apart
        return ()

    @property
    def off_peak(self) -> OffPeak | None:  # nor cheaper hours
        return None

    def __repr__(self) -> str:
        return f"LivePrice(input={self.input}, output={self.output})"
