from __future__ import annotations

from decimal import Decimal

import pytest

from policies.pricing import Price, Usage, cost_of, format_usd, in_picos, lookup, worst_case_cost

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


def test_cost_is_exact_over_many_calls() -> None:
    price = Price.per_million(D("0.15"), D("0.60"))
    total = sum((cost_of(Usage(7, 3), price) for _ in range(100_000)), D(0))
    assert total == D("0.285")  # a float sum would drift


@pytest.mark.parametrize("prompt, max_out, expected", [(100, 1000, D("0.0305")), (0, 0, D("0"))])
def test_worst_case_cost(prompt: int, max_out: int, expected: Decimal) -> None:
    assert worst_case_cost(prompt, max_out, Price.per_million(D("5"), D("30"))) == expected


def test_bundled_price_map() -> None:
    info = lookup("gpt-4o-mini")
    assert info is not None and info.price.input == D("1.5E-7") and info.price.output == D("6E-7")
    assert lookup("openai/gpt-4o-mini") == info
    assert lookup("no-such-model-xyz") is None
    assert info.price.cached_input == D("7.5E-8") and info.price.reasoning_output is None
    # litellm's map prices some models' reasoning tokens apart from their other output
    qwen = lookup("dashscope/qwen-turbo")
    assert qwen is not None and (qwen.price.output, qwen.price.reasoning_output) == (D("2E-7"), D("5E-7"))


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
