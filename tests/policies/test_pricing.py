from __future__ import annotations

from decimal import Decimal

import pytest

from policies.price_map import lookup
from policies.pricing import (
    Bill,
    Price,
    Tier,
    Usage,
    bill,
    cost_of,
    format_usd,
    in_picos,
    worst_case_cost,
)

D = Decimal


@pytest.mark.parametrize(
    "usage, price, expected",
    [
        (Usage(1000, 500), Price.per_million(D("0.15"), D("0.60")), D("0.00045")),
        (Usage(0, 0), Price.per_million(D("10"), D("30")), D("0")),
        (Usage(1, 1), Price.per_million(D("10"), D("30")), D("0.00004")),
        # cached prompt tokens at the cache price, the rest at the input price
        (Usage(1000, 0, cached_tokens=400), Price.per_million(D("2.5"), D("10"), D("1.25")), D("0.002")),
        # no cache price: cached tokens are billed as ordinary input
        (Usage(1000, 0, cached_tokens=400), Price.per_million(D("2.5"), D("10")), D("0.0025")),
        # an upstream claiming more cached than prompt tokens cannot make the cost negative
        (Usage(10, 0, cached_tokens=50), Price.per_million(D("1"), D("1"), D("0.5")), D("0.000005")),
        # reasoning tokens (part of the completion) at the reasoning price, the rest at the output price
        (Usage(0, 100, reasoning_tokens=60), Price.per_million(D("1"), D("2"), None, D("5")), D("0.00038")),
        # no reasoning price: reasoning tokens are billed as ordinary output
        (Usage(0, 100, reasoning_tokens=60), Price.per_million(D("1"), D("2")), D("0.0002")),
        (Usage(0, 10, reasoning_tokens=50), Price.per_million(D("1"), D("2"), None, D("5")), D("0.00005")),
        # both at once, and both scale with a lane's discount
        (
            Usage(1000, 100, cached_tokens=400, reasoning_tokens=60),
            Price.per_million(D("2"), D("10"), D("1"), D("20")).scaled(D("0.5")),
            D("0.0016"),
        ),
    ],
)
def test_cost_of(usage: Usage, price: Price, expected: Decimal) -> None:
    assert cost_of(usage, price) == expected


# Anthropic's claude-sonnet-4-5 rates per million: input 3, output 15, cache read 0.30, cache
# write 3.75 (5 minutes) and 6 (1 hour); its Batch API half of each.
SONNET = Price(
    D(3) / 10**6,
    D(15) / 10**6,
    D("0.3") / 10**6,
    None,
    D("3.75") / 10**6,
    D(6) / 10**6,
    batch=Price(D("1.5") / 10**6, D("7.5") / 10**6, D("0.15") / 10**6, None, D("1.875") / 10**6, D(3) / 10**6),
)


@pytest.mark.parametrize(
    "usage, tier, expected",
    [
        # 1000 plain input tokens, 100 output: 0.003 + 0.0015
        (Usage(1000, 100), Tier.STANDARD, Bill(D("0.0045"))),
        # 1000 written to the cache for 5 minutes of 1200 prompt tokens: writes at 1.25x input
        (Usage(1200, 100, cache_write_tokens=1000), Tier.STANDARD, Bill(D("0.00585"), D("-0.00075"))),
        # the same written for an hour: 2x input
        (Usage(1200, 100, cache_write_1h_tokens=1000), Tier.STANDARD, Bill(D("0.0081"), D("-0.003"))),
        # read back: 10% of input
        (Usage(1200, 100, cached_tokens=1000), Tier.STANDARD, Bill(D("0.0024"), D("0.0027"))),
        # reads, both writes and plain input in one call
        (
            Usage(4000, 0, cached_tokens=1000, cache_write_tokens=1000, cache_write_1h_tokens=1000),
            Tier.STANDARD,
            Bill(D("0.01305"), D("-0.00105")),
        ),
        # at the Batch API's price: half of each, the other half saved by the tier
        (Usage(1200, 100, cached_tokens=1000), Tier.BATCH, Bill(D("0.0012"), D("0.00135"), D("0.0012"))),
        # no flex tier sold: list price, nothing saved by a tier
        (Usage(1000, 100), Tier.FLEX, Bill(D("0.0045"))),
        # parts claimed beyond the prompt never make a cost negative or exceed the whole
        (Usage(100, 0, cached_tokens=80, cache_write_tokens=80), Tier.STANDARD, Bill(D("0.000099"), D("0.000201"))),
    ],
)
def test_every_token_at_its_own_price(usage: Usage, tier: Tier, expected: Bill) -> None:
    assert bill(usage, SONNET, tier) == expected


def test_worst_case_holds_the_dearest_rates() -> None:
    # a provider may write the whole prompt to its cache for an hour: 2x input
    assert worst_case_cost(1000, 100, SONNET) == D("0.0075")
    # reasoning dearer than output
    assert worst_case_cost(0, 10, Price.per_million(D(1), D(2), None, D(5))) == D("0.00005")


def test_usage_adds_every_part() -> None:
    total = Usage(10, 2, 3, 1, 4, 5) + Usage(1, 1, 1, 1, 1, 1)
    assert total == Usage(11, 3, 4, 2, 5, 6)


def test_cost_is_exact_over_many_calls() -> None:
    price = Price.per_million(D("0.15"), D("0.60"))
    total = sum((cost_of(Usage(7, 3), price) for _ in range(100_000)), D(0))
    assert total == D("0.285")  # a float sum would drift


@pytest.mark.parametrize("prompt, max_out, expected", [(100, 1000, D("0.0305")), (0, 0, D("0"))])
def test_worst_case_cost(prompt: int, max_out: int, expected: Decimal) -> None:
    assert worst_case_cost(prompt, max_out, Price.per_million(D("5"), D("30"))) == expected


@pytest.mark.parametrize(
    "amount, text",
    [
        (D("1.5E-7"), "0.00000015"),
        (D("0"), "0"),
        (D("0E-12"), "0"),
        (D("12.50"), "12.5"),
        (D("3"), "3"),
    ],
)
def test_format_usd(amount: Decimal, text: str) -> None:
    assert format_usd(amount) == text


@pytest.mark.parametrize(
    "amount, picos",
    [
        (D("0.00000700000002"), D("0.000007000000")),  # a measured local price's extra digits
        (D("0.00000015"), D("0.00000015")),  # price-list products are already whole picos
        (D("2.5E-13"), D("0E-12")),
        (D("7.5E-13"), D("1E-12")),  # half a pico rounds to even
    ],
)
def test_in_picos(amount: Decimal, picos: Decimal) -> None:
    assert in_picos(amount) == picos


def test_a_price_without_a_1h_write_rate_bills_1h_writes_at_2x_input_not_the_5m_rate() -> None:
    # litellm's map or a config that names only the 5-minute write rate (1.25x input)
    price = Price.per_million(D(3), D(15), D("0.3"), None, D("3.75"))
    assert price.cache_write_1h == D(6) / 10**6  # Anthropic's 2x input
    assert cost_of(Usage(1000, 0, cache_write_1h_tokens=1000), price) == D("0.006")
    assert worst_case_cost(1000, 0, price) == D("0.006")  # the hold covers a whole prompt written for an hour
    assert Price.per_million(D(3), D(15)).cache_write_1h is None  # a provider that bills no writes
    assert price.scaled(D("0.5")).cache_write_1h == D(3) / 10**6


# Long prompts (the map's `..._above_200k_tokens` rates): over the threshold, every token of the
# call is billed at the rates above it, prompt and output, cache reads and writes included.
HAIKU = Price.per_million(D("0.1"), D("0.5"), D("0.01"), None, D("0.125"), D("0.2"))


def long_haiku() -> Price:
    found = lookup("claude-haiku-5-5")  # Anthropic's: over 100k prompt tokens, 5x every rate
    assert found is not None
    return found.price


@pytest.mark.parametrize(
    "usage, expected",
    [
        # at the threshold: the plain rates
        (Usage(100_000, 1000), D("0.0105")),
        # one token over: every token at the long-prompt rates, the output too
        (Usage(100_001, 1000), D("0.0525005")),
        # the threshold counts the cache reads and writes (Anthropic: they are prompt tokens)
        (Usage(150_000, 0, cached_tokens=120_000, cache_write_tokens=20_000), D("0.0235")),
        (Usage(90_000, 0, cached_tokens=80_000, cache_write_tokens=5_000), D("0.001925")),
    ],
)
def test_a_long_prompt_is_billed_at_the_long_prompt_rates(usage: Usage, expected: Decimal) -> None:
    price = long_haiku()
    assert (price.input, price.output, price.cached_input, price.cache_write) == (
        HAIKU.input,
        HAIKU.output,
        HAIKU.cached_input,
        HAIKU.cache_write,
    )
    assert cost_of(usage, price) == expected
    assert bill(usage, price).cost == expected


def test_a_long_prompt_at_the_batch_tier_gets_the_batch_tiers_long_prompt_rates() -> None:
    price = long_haiku()
    assert price.batch is not None
    usage = Usage(200_000, 1000)
    assert bill(usage, price, Tier.BATCH) == Bill(D("0.05125"), D("0"), D("0.05125"))  # half of 0.1025
    assert cost_of(usage, price) == D("0.1025")


def test_the_hold_bounds_a_long_prompt_at_its_rates() -> None:
    """A hold whose prompt bound passes the threshold is taken at the long-prompt rates, so it
    still bounds the call: at the plain rates it would hold a fifth of what is billed."""
    price = long_haiku()
    # the dearest prompt rate (a 1-hour cache write) and output rate, above 100k: 1e-6 and 2.5e-6
    assert worst_case_cost(150_000, 1000, price) == D("0.1525")
    assert worst_case_cost(150_000, 1000, price) >= cost_of(Usage(150_000, 1000, cache_write_1h_tokens=150_000), price)
    assert worst_case_cost(50_000, 1000, price) == D("0.0105")  # under it: the plain rates


def test_scaling_a_price_scales_its_long_prompt_rates() -> None:
    half = long_haiku().scaled(D("0.5"))
    assert half.long_context[0].price.input == D("2.5E-7") and half.long_context[0].above_tokens == 100_000


def test_the_priority_tier_is_billed_at_its_own_rates_and_its_premium_is_no_saving() -> None:
    found = lookup("gpt-5")
    assert found is not None and found.price.priority is not None
    price = found.price
    assert (price.priority.input, price.priority.output, price.priority.cached_input) == (
        D("2.5E-6"),
        D("2E-5"),
        D("2.5E-7"),
    )
    usage = Usage(1000, 100)
    assert bill(usage, price, Tier.PRIORITY) == Bill(D("0.0045"), D("0"), D("-0.00225"))  # list: 0.00225
    plain = Price.per_million(D(1), D(2))
    assert bill(usage, plain, Tier.PRIORITY) == bill(usage, plain)  # a model sold without it: list price
    assert lookup("gpt-5.4").price.priority.long_context[0].price.input == D("1E-5")  # type: ignore[union-attr]
