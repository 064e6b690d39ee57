"""The local cost model: dollars and grams per token from measured throughput."""

from __future__ import annotations

from decimal import Decimal

import pytest

from engine.cost import CostConfig, Counters, LivePrice, ThroughputMeter, carbon_grams, machine_seconds, price_per_token
from engine.throughput import Smoothing
from policies.pricing import Price, Usage, cost_of


@pytest.mark.parametrize(
    ("gpu_hour", "tps", "expected"),
    [
        ("3.60", 1000.0, "0.000001"),  # $3.60/h = $0.001/s, at 1000 tok/s: $1e-6 per token
        ("7.20", 50.0, "0.00004"),  # $0.002/s at 50 tok/s
        ("0", 20.0, "0"),  # a machine already paid for: free
    ],
)
def test_price_per_token(gpu_hour: str, tps: float, expected: str) -> None:
    assert price_per_token(Decimal(gpu_hour), tps) == Decimal(expected)


def test_price_needs_a_positive_rate() -> None:
    with pytest.raises(ValueError):
        price_per_token(Decimal(1), 0.0)


@pytest.mark.parametrize(
    ("seconds", "watts", "grid", "grams"),
    [
        (3600.0, 1000.0, 400.0, 400.0),  # 1 kWh on a 400 g/kWh grid
        (1.0, 300.0, 400.0, 300 / 3.6e6 * 400),
        (10.0, 300.0, 0.0, 0.0),  # a carbon-free grid
    ],
)
def test_carbon_grams(seconds: float, watts: float, grid: float, grams: float) -> None:
    assert carbon_grams(seconds, watts, grid) == pytest.approx(grams)


def test_machine_seconds_weighs_prompt_and_output_by_their_own_rates() -> None:
    assert machine_seconds(Usage(1000, 50), prompt_tps=1000.0, output_tps=50.0) == pytest.approx(2.0)


def _counters(at: float, prompt: float, gen: float, prefill: float, running: float = 1) -> Counters:
    return Counters(at, prompt, gen, prefill, running)


def test_meter_starts_at_the_priors_and_follows_measurements() -> None:
    meter = ThroughputMeter(
        CostConfig(
            gpu_hour_usd=Decimal("3.6"),
            tokens_per_second=10.0,
            prompt_tokens_per_second=100.0,
            smoothing=Smoothing(min_tokens=100, weight=0.5, max_step=2.0),
        )
    )
    assert meter.price() == Price(Decimal("0.00001"), Decimal("0.0001")) and not meter.measured
    meter.observe(_counters(0.0, 0, 0, 0))
    meter.observe(_counters(1.0, 50, 50, 0.1))  # under the evidence floor: pooled, no change
    assert not meter.measured and meter.output_tps == 10 and meter.prompt_tps == 100
    meter.observe(_counters(2.0, 400, 200, 0.5))  # 200 tokens in 2 s, 400 prompt tokens in 0.5 s
    assert meter.measured and meter.output_tps == 100 and meter.prompt_tps == 800
    meter.observe(_counters(3.0, 400, 200, 0.5))  # idle window: no change
    assert meter.output_tps == 100
    meter.observe(_counters(4.0, 400, 300, 0.5))  # 100 tok/s again: stays
    meter.observe(_counters(6.0, 400, 400, 0.5))  # 50 tok/s, moved half way
    assert meter.output_tps == 75
    meter.observe(_counters(7.0, 10, 5, 0.01))  # counters went back: a restart, new baseline only
    assert meter.output_tps == 75
    assert meter.price().output == price_per_token(Decimal("3.6"), 75)


def test_live_price_is_a_price_that_follows_the_meter() -> None:
    meter = ThroughputMeter(
        CostConfig(gpu_hour_usd=Decimal("3.6"), tokens_per_second=100.0, prompt_tokens_per_second=1000.0)
    )
    price = LivePrice(meter)  # the default evidence floor (256 tokens) is met by the 1000 below
    assert isinstance(price, Price)
    before = cost_of(Usage(1000, 100), price)
    assert before == Decimal("0.001") + Decimal("0.001")
    meter.observe(_counters(0.0, 0, 0, 0))
    meter.observe(_counters(1.0, 0, 1000, 0))  # ten times faster output
    assert cost_of(Usage(1000, 100), price) == Decimal("0.001") + Decimal("0.0001")
    assert price.scaled(Decimal("0.5")).output == Decimal("0.0000005")  # batch discount works on it
    assert price.premium("us", "fast") == 1 and price.dearest_region() == 1  # no region or speed sold apart
    assert price.off_peak is None  # nor cheaper hours


def test_carbon_of_a_call_uses_the_measured_rates() -> None:
    meter = ThroughputMeter(
        CostConfig(tokens_per_second=50.0, prompt_tokens_per_second=500.0, power_watts=360.0, grid_g_per_kwh=100.0)
    )
    # 500/500 + 50/50 = 2 machine-seconds at 360 W = 720 J = 0.0002 kWh -> 0.02 g
    assert meter.carbon(Usage(500, 50)) == pytest.approx(0.02)
