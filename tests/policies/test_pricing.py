from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

import pytest

from policies.price_map import lookup
from policies.pricing import (
    FREE,
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


def test_map_prices_tiers_and_cache_writes() -> None:
    sonnet = lookup("anthropic/claude-sonnet-4-5")
    assert sonnet is not None
    assert (sonnet.price.cache_write, sonnet.price.cache_write_1h) == (D("3.75E-6"), D("6E-6"))
    assert sonnet.price.batch is not None and sonnet.price.batch.input == D("1.5E-6")
    assert sonnet.price.batch.cache_write == D("1.875E-6")  # the map's own batch cache-write rate
    assert sonnet.price.flex is None
    mini = lookup("gpt-5-mini")
    assert mini is not None and mini.price.flex is not None
    assert (mini.price.flex.input, mini.price.flex.output, mini.price.flex.cached_input) == (
        D("1.25E-7"),
        D("1E-6"),
        D("1.25E-8"),
    )


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


def test_the_map_prices_long_prompts_of_each_provider() -> None:
    for model, above, input_, output in (
        ("gpt-5.4", 272_000, D("5E-6"), D("2.25E-5")),  # OpenAI: 2x input, 1.5x output
        ("gemini-2.5-pro", 200_000, D("2.5E-6"), D("1.5E-5")),
        ("claude-haiku-5-5", 100_000, D("5E-7"), D("2.5E-6")),
    ):
        found = lookup(model)
        assert found is not None
        (longer,) = found.price.long_context
        assert (longer.above_tokens, longer.price.input, longer.price.output) == (above, input_, output)
        assert found.price.for_prompt(above) is found.price and found.price.for_prompt(above + 1) is longer.price
    assert lookup("gpt-4o").price.long_context == ()  # type: ignore[union-attr]


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


@pytest.mark.parametrize(
    "model, usage, tier",
    [
        ("gpt-5.4", Usage(300_000, 1000), Tier.STANDARD),
        ("gpt-5.4", Usage(200_000, 1000, 50_000), Tier.STANDARD),
        ("gemini-2.5-pro", Usage(250_000, 2000), Tier.STANDARD),
        ("claude-haiku-5-5", Usage(120_000, 500, 60_000), Tier.STANDARD),
        ("claude-haiku-5-5", Usage(90_000, 500), Tier.STANDARD),
        ("anthropic.claude-sonnet-4-5-20250929-v1:0", Usage(210_000, 300), Tier.STANDARD),
        ("gpt-5", Usage(1000, 200), Tier.PRIORITY),
        ("gpt-4.1", Usage(5000, 100, 1000), Tier.PRIORITY),
        ("gpt-6-astra", Usage(10_000, 500, 2000), Tier.ULTRAFAST),  # 6x every rate
        ("gpt-6.1-sol", Usage(300_000, 500), Tier.ULTRAFAST),  # and its own rates over 272k
    ],
)
def test_long_prompts_and_the_priority_tier_cost_what_litellms_calculator_says(
    model: str, usage: Usage, tier: Tier
) -> None:
    """The same map read by litellm's own cost calculator: the ledger's figure to the pico-dollar."""
    found = lookup(model)
    assert found is not None
    service_tier = None if tier is Tier.STANDARD else tier.value
    assert in_picos(bill(usage, found.price, tier).cost) == litellms_cost(model, usage, service_tier=service_tier)


@pytest.mark.parametrize(
    "model, usage, geo, speed",
    [
        ("claude-opus-5-5", Usage(10_000, 500, 2000), "us", None),  # 1.1x every rate
        ("claude-opus-5-5", Usage(10_000, 500), "us", "fast"),  # and fast mode's 2x on top
        ("claude-opus-5-5", Usage(10_000, 500), "global", "fast"),
        ("claude-opus-5-5", Usage(10_000, 500), "global", "standard"),
        ("claude-haiku-5-5", Usage(120_000, 500, 60_000), "US", None),  # a long prompt's rates, 1.1x
        ("claude-haiku-5-5", Usage(1000, 500), "eu", None),  # a region the map names no premium for
        ("bedrock/claude_platform/claude-opus-5", Usage(10_000, 500), "us", None),  # Bedrock: the region's
    ],
)
def test_anthropic_regions_and_fast_mode_cost_what_litellms_calculator_says(
    model: str, usage: Usage, geo: str, speed: str | None
) -> None:
    """Anthropic bills US-only inference at 1.1x on its models since February 2026, and fast mode
    at the map's factor, as the answer's usage says (`inference_geo`, `speed`): the ledger's
    figure is litellm's to the pico-dollar."""
    found = lookup(model)
    assert found is not None
    ours = bill(usage, found.price, premium=found.price.premium(geo, speed)).cost
    provider = "bedrock" if model.startswith("bedrock/") else "anthropic"
    theirs = litellms_cost(
        model, usage, provider, cache_read_input_tokens=usage.cached_tokens, inference_geo=geo, speed=speed
    )
    assert in_picos(ours) == theirs
    assert (ours > bill(usage, found.price).cost) == (geo == "us" or (geo == "US") or speed == "fast")


def test_only_anthropics_and_bedrocks_entries_are_read_as_premiums() -> None:
    opus = lookup("claude-opus-5-5")
    assert opus is not None and dict(opus.price.premiums) == {"us": D("1.1"), "fast": D("2")}
    on_bedrock = lookup("bedrock/claude_platform/claude-opus-5-5")  # regions only: Bedrock sells no fast mode
    assert on_bedrock is not None and dict(on_bedrock.price.premiums) == {"us": D("1.1")}
    assert opus.price.dearest_region() == D("1.1")  # a hold's region when the request pins none
    gpt = lookup("gpt-realtime-2")  # `realtime_ga_only: 1` there is a flag, not a price
    assert gpt is None or gpt.price.premiums == ()
    assert FREE.premium("us", "fast") == 1 and FREE.dearest_region() == 1


@pytest.mark.parametrize(
    "model, usage",
    [
        ("dashscope/qwen3-max", Usage(1000, 500)),
        ("dashscope/qwen3-max", Usage(32_000, 500)),  # a range's end stays in it
        ("dashscope/qwen3-max", Usage(32_001, 500)),
        ("dashscope/qwen3-max", Usage(300_000, 500)),  # past the last range: the last tier
        ("dashscope/qwen-flash", Usage(300_000, 100, 100_000)),  # cache reads at the tier's input rate
        ("volcengine/doubao-seed-2-0-pro-260215", Usage(140_000, 1000)),
        ("opencode_go/grok-4.7", Usage(250_000, 1000, 50_000)),  # a flat price too: the tiers win
        ("opencode_go/grok-4.7", Usage(20_000, 1000, 5000)),
    ],
)
def test_a_tiered_price_table_costs_what_litellms_calculator_says(model: str, usage: Usage) -> None:
    """litellm's `tiered_pricing` (Alibaba's Qwen, Volcengine, OpenCode Go): the tier the prompt's
    length falls in prices every token of the call. The map's Qwen models have no flat price, so
    they could not be served without a `price:` in the config."""
    found = lookup(model)
    assert found is not None
    assert in_picos(bill(usage, found.price).cost) == litellms_cost(model, usage)


def litellms_cost(
    model: str,
    usage: Usage,
    provider: str | None = None,
    service_tier: str | None = None,
    data_residency: str | None = None,
    current_time: datetime | None = None,
    **fields: Any,
) -> Decimal:
    """What litellm's own cost calculator makes of `usage` on `model`, from the same bundled map,
    in pico-dollars; `fields` go into its usage object as a provider's answer fills them."""
    from litellm import cost_per_token
    from litellm.types.utils import PromptTokensDetailsWrapper
    from litellm.types.utils import Usage as LitellmUsage

    details = PromptTokensDetailsWrapper(cached_tokens=usage.cached_tokens) if usage.cached_tokens else None
    theirs = LitellmUsage(
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        total_tokens=usage.total_tokens,
        prompt_tokens_details=details,
        **fields,
    )
    if current_time is not None:  # its entry point for a moment other than now
        from litellm.litellm_core_utils.llm_cost_calc.utils import generic_cost_per_token

        assert provider is not None
        prompt, completion = generic_cost_per_token(
            model=model, usage=theirs, custom_llm_provider=provider, current_time=current_time
        )
        return in_picos(D(str(prompt)) + D(str(completion)))
    prompt, completion = cost_per_token(
        model=model,
        usage_object=theirs,
        custom_llm_provider=provider,
        service_tier=service_tier,
        data_residency=data_residency,
    )
    return in_picos(D(str(prompt)) + D(str(completion)))


@pytest.mark.parametrize(
    "host, residency",
    [
        ("eu.api.openai.com", "eu"),
        ("us.api.openai.com", "us"),
        ("gov.api.openai.com", "fedramp"),
        ("api.openai.com", None),
    ],
)
@pytest.mark.parametrize("model", ["gpt-5.5", "gpt-5"])
def test_openais_regional_hosts_cost_what_litellms_calculator_says(
    model: str, host: str, residency: str | None
) -> None:
    """OpenAI bills data-residency projects (eu., us.api.openai.com) and FedRAMP (gov.) at the
    map's uplift, which litellm infers from the host; gpt-5 has the FedRAMP one only."""
    found = lookup(model)
    assert found is not None
    usage = Usage(10_000, 500, 2000)
    assert in_picos(bill(usage, found.at_host(host)).cost) == litellms_cost(
        model, usage, "openai", data_residency=residency
    )


@pytest.mark.parametrize(
    "when",
    [
        "2026-12-04T00:30:00+00:00",  # a Friday, in 00:00-01:00
        "2026-12-04T01:00:00+00:00",  # the window's end: peak
        "2026-12-04T07:00:00+00:00",  # peak
        "2026-12-04T23:59:00+00:00",  # in 10:00-00:00
        "2026-12-05T07:00:00+00:00",  # a Saturday: all day
        "2026-12-04T17:00:00+00:00",  # Friday in UTC, Saturday in Shanghai (weekday_timezone)
        "2026-12-06T17:00:00+00:00",  # Sunday in UTC, Monday in Shanghai
    ],
)
@pytest.mark.parametrize(
    "model, provider", [("deepseek/deepseek-v4-pro", "deepseek"), ("tencent/deepseek-v4.1-flash", "tencent")]
)
def test_off_peak_hours_cost_what_litellms_calculator_says(model: str, provider: str, when: str) -> None:
    """DeepSeek sells its models at about half price 16 hours of a weekday and all weekend
    (litellm's `off_peak_pricing`): a call billed then is charged the off-peak price, and what
    that saved counts as the provider's discount."""
    found = lookup(model)
    assert found is not None and found.price.off_peak is not None
    usage, moment = Usage(10_000, 500, 3000), datetime.fromisoformat(when)
    ours = bill(usage, found.price, when=moment)
    assert in_picos(ours.cost) == litellms_cost(model, usage, provider, current_time=moment)
    assert (ours.tier_saved > 0) == found.price.off_peak.covers(moment)
    assert bill(usage, found.price, Tier.BATCH, when=moment) == ours  # no batch tier: list price, its hours too
