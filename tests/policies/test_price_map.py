"""litellm's bundled price map as policies/price_map.py reads it: the rates, tiers and
long-prompt prices it names, and, wherever litellm's own cost calculator applies a billing rule
(long prompts, service tiers, Anthropic's regions and fast mode, tiered tables, OpenAI's regional
hosts, off-peak hours), the same figure to the pico-dollar on the same map."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

import pytest

from policies.price_map import lookup
from policies.pricing import FREE, Tier, Usage, bill, in_picos

D = Decimal


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


def test_bundled_price_map() -> None:
    info = lookup("gpt-4o-mini")
    assert info is not None and info.price.input == D("1.5E-7") and info.price.output == D("6E-7")
    assert lookup("openai/gpt-4o-mini") == info
    assert lookup("no-such-model-xyz") is None
    assert info.price.cached_input == D("7.5E-8") and info.price.reasoning_output is None
    # litellm's map prices some models' reasoning tokens apart from their other output
    qwen = lookup("dashscope/qwen-turbo")
    assert qwen is not None and (qwen.price.output, qwen.price.reasoning_output) == (D("2E-7"), D("5E-7"))


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
