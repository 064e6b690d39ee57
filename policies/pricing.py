"""Prices in dollars per token, and the cost of a call: pure functions over Decimal.

Prices come from litellm's bundled price map (policies/price_map.py) and are overridden per
model by the config.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime, tzinfo
from decimal import Decimal
from enum import StrEnum
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

MILLION = Decimal(1_000_000)
ZERO = Decimal(0)
PICO_USD = Decimal("1e-12")  # the ledger's unit: every charge is a whole number of these


def in_picos(amount: Decimal) -> Decimal:
    """`amount` rounded to the ledger's unit, so the header, the ledger and the budget counters
    carry the same number (a measured local price has more digits than a price list)."""
    return amount.quantize(PICO_USD)


def to_pico(amount: Decimal) -> int:
    """Dollars as the integer count of pico-dollars counters and the ledger store."""
    return int((amount / PICO_USD).to_integral_value())


def from_pico(value: int | None) -> Decimal:
    return Decimal(value or 0) * PICO_USD


class Tier(StrEnum):
    """The provider's service tier a call is billed at: its list price, its Batch API's (about
    half, for work it may finish within a day), its flex tier's (`service_tier: flex`,
    synchronous but slower and sometimes refused, also about half), its priority tier's
    (OpenAI's `service_tier: priority`, renamed `fast` in 2026, or a project whose default it is:
    1.7-2x) or its ultrafast tier's (GPT-6 Astra and 6.1 Sol: 6x)."""

    STANDARD = "standard"
    BATCH = "batch"
    FLEX = "flex"
    PRIORITY = "priority"
    ULTRAFAST = "ultrafast"


# OpenAI's `service_tier` names, in a request or an answer, for the tiers sold apart from list
# price (priority was renamed fast on 2026-07-30; both are served); any other name: list price.
SERVICE_TIERS = {"flex": Tier.FLEX, "priority": Tier.PRIORITY, "fast": Tier.PRIORITY, "ultrafast": Tier.ULTRAFAST}


WRITE_1H_OVER_5M = Decimal("1.6")  # a 1-hour cache write's rate over a 5-minute one's (2 / 1.25)


@dataclass(frozen=True, slots=True)
class LongContext:
    """A long prompt's price: a call whose prompt has more than `above_tokens` tokens is billed
    at `price` for every token of it, prompt and output (Anthropic over 200k or 100k prompt
    tokens, cache reads and writes counted; Gemini over 200k; OpenAI's GPT-5.4 and later over
    272k: about 2x input and 1.5x output)."""

    above_tokens: int
    price: Price


@dataclass(frozen=True, slots=True)
class Price:
    """Dollars per token. `cached_input` applies to prompt tokens the upstream read from its
    prompt cache, `cache_write` / `cache_write_1h` to the ones it wrote there (Anthropic bills a
    5-minute write at 1.25x input, a 1-hour one at 2x), `reasoning_output` to output tokens a
    model spent reasoning; None: the plain rate. `batch`, `flex`, `priority` and `ultrafast` are
    the same call's prices at those tiers (None: the provider sells none); `long_context` the prices of
    longer prompts, by rising threshold (`for_prompt`)."""

    input: Decimal
    output: Decimal
    cached_input: Decimal | None = None
    reasoning_output: Decimal | None = None
    cache_write: Decimal | None = None
    cache_write_1h: Decimal | None = None
    batch: Price | None = None
    flex: Price | None = None
    long_context: tuple[LongContext, ...] = ()
    priority: Price | None = None
    ultrafast: Price | None = None
    # Factors on every rate, by what an answer says it was served at: a region (Anthropic's
    # `inference_geo`, `us`: 1.1x on its models since February 2026) or fast mode (`fast`).
    premiums: tuple[tuple[str, Decimal], ...] = ()
    off_peak: OffPeak | None = None  # the provider's cheaper hours (DeepSeek's), of its list price

    def __post_init__(self) -> None:
        # A provider that bills 5-minute cache writes bills 1-hour ones too, at 2x input where the
        # 5-minute ones are 1.25x (Anthropic's rule, also on Bedrock and Vertex): a price that
        # names only the former bills the latter at 1.6 times it, never at the lower rate.
        if self.cache_write_1h is None and self.cache_write is not None:
            object.__setattr__(self, "cache_write_1h", self.cache_write * WRITE_1H_OVER_5M)

    @classmethod
    def per_million(
        cls,
        input_per_mtok: Decimal,
        output_per_mtok: Decimal,
        cached_input_per_mtok: Decimal | None = None,
        reasoning_output_per_mtok: Decimal | None = None,
        cache_write_per_mtok: Decimal | None = None,
        cache_write_1h_per_mtok: Decimal | None = None,
    ) -> Price:
        return cls(
            Decimal(input_per_mtok) / MILLION,
            Decimal(output_per_mtok) / MILLION,
            _per_token(cached_input_per_mtok),
            _per_token(reasoning_output_per_mtok),
            _per_token(cache_write_per_mtok),
            _per_token(cache_write_1h_per_mtok),
        )

    def scaled(self, factor: Decimal) -> Price:
        return Price(
            self.input * factor,
            self.output * factor,
            _times(self.cached_input, factor),
            _times(self.reasoning_output, factor),
            _times(self.cache_write, factor),
            _times(self.cache_write_1h, factor),
            batch=None if self.batch is None else self.batch.scaled(factor),
            flex=None if self.flex is None else self.flex.scaled(factor),
            long_context=tuple(LongContext(t.above_tokens, t.price.scaled(factor)) for t in self.long_context),
            priority=None if self.priority is None else self.priority.scaled(factor),
            ultrafast=None if self.ultrafast is None else self.ultrafast.scaled(factor),
            off_peak=None if self.off_peak is None else self.off_peak.scaled(factor),
        )

    def for_prompt(self, prompt_tokens: int) -> Price:
        """The price a call with `prompt_tokens` of prompt is billed at: that of the highest
        long-context threshold it passes, else this one."""
        billed = self
        for tier in self.long_context:
            if prompt_tokens > tier.above_tokens:
                billed = tier.price
        return billed

    def premium(self, geo: str | None = None, speed: str | None = None) -> Decimal:
        """The factor on every rate of a call whose answer says it was served in region `geo`
        (`global`: none) at `speed` (`fast`: fast mode), as litellm's map gives them
        (`provider_specific_entry`) and its cost calculator applies them; 1 for what the map
        names no premium for."""
        rates = dict(self.premiums)
        factor = Decimal(1)
        if geo is not None and geo.lower() not in ("global", "not_available", FAST):
            factor *= rates.get(geo.lower(), Decimal(1))
        if speed == FAST:
            factor *= rates.get(FAST, Decimal(1))
        return factor

    def dearest_region(self) -> Decimal:
        """The highest regional premium: the factor a hold takes when nothing in the request says
        where it is served (Anthropic serves a workspace's `default_inference_geo`)."""
        return max((f for name, f in self.premiums if name != FAST), default=Decimal(1))

    def at(self, tier: Tier) -> Price | None:
        """This price at `tier`; None when the provider sells no such tier."""
        return self if tier is Tier.STANDARD else getattr(self, tier.value)  # each tier's field is named so


def _times(rate: Decimal | None, factor: Decimal) -> Decimal | None:
    return None if rate is None else rate * factor


def _per_token(per_mtok: Decimal | None) -> Decimal | None:
    return None if per_mtok is None else Decimal(per_mtok) / MILLION


Window = tuple[int, int]  # minutes of the day, UTC: [start, end); start >= end wraps past midnight


@dataclass(frozen=True, slots=True)
class OffPeak:
    """A provider's off-peak hours and its price in them (litellm's `off_peak_pricing`; DeepSeek
    sells about half price 16 hours of a weekday and all weekend). `daily` windows hold every day;
    each of `by_weekday` on its ISO weekdays (None: every day), read on the calendar of
    `weekday_zone` (None: UTC)."""

    price: Price
    daily: tuple[Window, ...] = ()
    by_weekday: tuple[tuple[frozenset[int] | None, tuple[Window, ...]], ...] = ()
    weekday_zone: str | None = None

    def scaled(self, factor: Decimal) -> OffPeak:
        return replace(self, price=self.price.scaled(factor))

    def covers(self, when: datetime) -> bool:
        """Whether `when` (aware; naive is read as UTC) falls in these hours, as litellm reads them."""
        utc = when.astimezone(UTC) if when.tzinfo is not None else when.replace(tzinfo=UTC)
        minute = utc.hour * 60 + utc.minute
        if any(_within(window, minute) for window in self.daily):
            return True
        day = utc.astimezone(_calendar(self.weekday_zone)).isoweekday()
        return any(
            (days is None or day in days) and any(_within(window, minute) for window in windows)
            for days, windows in self.by_weekday
        )


def _within(window: Window, minute: int) -> bool:
    start, end = window
    return start <= minute < end if start < end else (minute >= start or minute < end)


def _calendar(zone: str | None) -> tzinfo:
    try:
        return ZoneInfo(zone) if zone else UTC
    except (ValueError, ZoneInfoNotFoundError):
        return UTC


FREE = Price(ZERO, ZERO)
FAST = "fast"  # Anthropic's fast mode: `speed: fast` in a request, and in its answer's usage


@dataclass(frozen=True, slots=True)
class Usage:
    """One call's tokens. `prompt_tokens` counts every input token, whatever its price: the
    cache reads (`cached_tokens`) and writes (`cache_write_tokens` for a 5-minute TTL,
    `cache_write_1h_tokens` for a 1-hour one) are parts of it, as in OpenAI's usage."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0  # the part of prompt_tokens the upstream read from its prompt cache
    reasoning_tokens: int = 0  # the part of completion_tokens the model spent reasoning
    cache_write_tokens: int = 0  # the part of prompt_tokens written to the prompt cache (5-minute TTL)
    cache_write_1h_tokens: int = 0  # the part of prompt_tokens written to the prompt cache (1-hour TTL)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(*(getattr(self, n) + getattr(other, n) for n in Usage.__slots__))

    def uncached(self) -> Usage:
        """The same call as if the provider had no prompt cache: every prompt token plain input."""
        return Usage(self.prompt_tokens, self.completion_tokens, reasoning_tokens=self.reasoning_tokens)


def cost_of(usage: Usage, price: Price) -> Decimal:
    """The exact dollar cost of one call, as the provider bills it: cache reads, cache writes and
    reasoning tokens at their own rates where the price has them (as litellm's cost calculator
    prices them), the rest at the plain rates, all at the long-context price when the prompt
    passes one's threshold. Claimed parts never exceed the whole, so an upstream that
    over-reports them cannot make a cost negative."""
    price = price.for_prompt(usage.prompt_tokens)
    left = usage.prompt_tokens
    cost = ZERO
    for tokens, rate in (
        (usage.cached_tokens, price.cached_input),
        (usage.cache_write_1h_tokens, price.cache_write_1h),
        (usage.cache_write_tokens, price.cache_write),
    ):
        part = min(max(tokens, 0), left)
        if part and rate is not None:
            cost += part * rate
            left -= part
    cost += left * price.input
    reasoning = min(usage.reasoning_tokens, usage.completion_tokens) if price.reasoning_output is not None else 0
    cost += (usage.completion_tokens - reasoning) * price.output
    if reasoning:
        cost += reasoning * price.reasoning_output  # type: ignore[operator]
    return cost


@dataclass(frozen=True, slots=True)
class Bill:
    """One call as the provider bills it, and what its own discounts saved against list price:
    `cache_saved` what its prompt cache saved (negative while writes cost more than they have
    saved yet), `tier_saved` what its batch or flex tier saved (negative at the priority tier or
    at a premium: what it cost beyond list price)."""

    cost: Decimal
    cache_saved: Decimal = ZERO
    tier_saved: Decimal = ZERO


def bill(
    usage: Usage,
    price: Price,
    tier: Tier = Tier.STANDARD,
    premium: Decimal = Decimal(1),
    when: datetime | None = None,
) -> Bill:
    """The call's cost at `tier` (the list price when the provider sells no such tier), at the
    off-peak price when the provider has one and the call was billed `when` it holds (the saving
    a provider's discount, like its tiers'), times `premium` (`Price.premium`: a region's or
    fast mode's), which is no saving either."""
    billed = price.at(tier) or price
    if billed is price and when is not None and price.off_peak is not None and price.off_peak.covers(when):
        billed = price.off_peak.price  # list price's hours: not a tier's (a provider selling both has none)
    if premium != 1:
        billed = billed.scaled(premium)
    cost = cost_of(usage, billed)
    cache_saved = cost_of(usage.uncached(), billed) - cost
    tier_saved = cost_of(usage, price) - cost if billed is not price else ZERO
    return Bill(cost, cache_saved, tier_saved)


def worst_case_cost(prompt_tokens: int, max_output_tokens: int, price: Price) -> Decimal:
    """The most a call can cost: every prompt token at the dearest input rate (a provider may
    write the whole prompt to its cache, at up to 2x input for a 1-hour TTL), every allowed output
    token used at the dearest output rate, at the long-context price when `prompt_tokens` passes
    one's threshold (a bound on the prompt: the call's own can only be lower, and so its rates)."""
    price = price.for_prompt(prompt_tokens)
    prompt_rate = max(r for r in (price.input, price.cache_write, price.cache_write_1h) if r is not None)
    output_rate = max(r for r in (price.output, price.reasoning_output) if r is not None)
    return prompt_tokens * prompt_rate + max_output_tokens * output_rate


def format_usd(amount: Decimal) -> str:
    """Decimal dollars as a plain string without exponent (`0.00000015`, not `1.5E-7`)."""
    text = format(amount.normalize(), "f")
    return "0" if text in ("-0", "") else text
