"""A moving estimate of a model's tokens per second, the rate its price is computed from. Pure.

Why not the rate of the last scrape window: a window that caught only the tail of an answer
(two tokens in two seconds) says 1 tok/s where the engine runs at 11, and a price that follows
it jumps tenfold between two similar requests (15x was seen). So the estimate moves only on
enough evidence, and only so far:

- **a floor of evidence**: windows are pooled until they hold `min_tokens` tokens; one step
  then takes their pooled rate (tokens / seconds), so a short window weighs what it holds;
- **the prior is replaced once**: until the first step the configured prior (a guess) stands;
  the first pooled rate replaces it outright (smoothing toward a guess would only delay the
  measured price);
- **then an EWMA with a bounded step**: each later step moves the estimate `weight` of the way
  to the pooled rate, and by at most a factor `max_step` either way.

Idle windows (no tokens) are not evidence of anything and change nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True, slots=True)
class Smoothing:
    min_tokens: float = 256.0  # tokens pooled before the estimate moves
    weight: float = 0.3  # share of the newest pooled rate in the moving average
    max_step: float = 1.25  # one step changes the estimate by at most this factor, up or down

    def __post_init__(self) -> None:
        if self.min_tokens <= 0 or not 0 < self.weight <= 1 or self.max_step < 1:
            raise ValueError(f"invalid rate smoothing {self}: min_tokens > 0, 0 < weight <= 1, max_step >= 1")


DEFAULT_SMOOTHING = Smoothing()


@dataclass(frozen=True, slots=True)
class RateEstimate:
    rate: float  # tokens per second, as priced
    measured: bool = False  # False: still the configured prior
    pending_tokens: float = 0.0  # evidence pooled since the last step
    pending_seconds: float = 0.0


def observe_rate(estimate: RateEstimate, tokens: float, seconds: float, smoothing: Smoothing) -> RateEstimate:
    """The estimate after one measured window of `tokens` in `seconds` of engine time."""
    if tokens <= 0 or seconds <= 0:
        return estimate
    tokens += estimate.pending_tokens
    seconds += estimate.pending_seconds
    if tokens < smoothing.min_tokens:
        return replace(estimate, pending_tokens=tokens, pending_seconds=seconds)
    pooled = tokens / seconds
    if not estimate.measured:
        return RateEstimate(pooled, measured=True)
    moved = (1 - smoothing.weight) * estimate.rate + smoothing.weight * pooled
    low, high = estimate.rate / smoothing.max_step, estimate.rate * smoothing.max_step
    return RateEstimate(min(max(moved, low), high), measured=True)
