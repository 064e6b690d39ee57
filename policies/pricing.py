"""Prices in dollars per token, and the cost of a call: pure functions over Decimal.

Prices come from litellm's bundled price map (read as a JSON file, so litellm is never
imported and never reaches the network) and are overridden per model by the config.
"""

from __future__ import annotations

import importlib.util
import json
import re
from dataclasses import dataclass, replace
from datetime import UTC, datetime, tzinfo
from decimal import Decimal
from enum import StrEnum
from functools import cache
from pathlib import Path
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


@dataclass(frozen=True, slots=True)
class ModelInfo:
    price: Price
    max_output_tokens: int | None
    max_input_tokens: int | None
    reasons: bool = False  # the map's `supports_reasoning`: the model takes a reasoning effort
    per_search: Decimal | None = None  # the map's `search_context_cost_per_query` (its dearest size): a web search
    # OpenAI's uplift on every rate of a call its regional host served (`regional_host`):
    # `regional_processing_uplift_multiplier_eu` / `_us`, `fedramp_uplift_multiplier`
    regions: tuple[tuple[str, Decimal], ...] = ()

    def at_host(self, host: str | None) -> Price:
        """The price of this model's calls to `host`: OpenAI bills a project with data residency,
        served from eu./us.api.openai.com, and its FedRAMP host gov.api.openai.com, at an uplift
        on every rate (10% where the map names one), as litellm's calculator infers it from the
        host; any other host, the price."""
        factor = dict(self.regions).get(REGIONAL_HOSTS.get((host or "").lower(), ""))
        return self.price if factor is None else self.price.scaled(factor)


REGIONAL_HOSTS = {"eu.api.openai.com": "eu", "us.api.openai.com": "us", "gov.api.openai.com": "fedramp"}


def _price_map_path() -> Path:
    spec = importlib.util.find_spec("litellm")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("litellm is not installed: its bundled price map is needed")
    return Path(next(iter(spec.submodule_search_locations))) / "model_prices_and_context_window_backup.json"


@cache
def _price_map() -> dict[str, dict]:
    return json.loads(_price_map_path().read_text())


def _dec(value: object) -> Decimal | None:
    # str() first: Decimal(1.5e-07) would carry the float's binary error into the ledger.
    return None if value is None else Decimal(str(value))


def lookup(model: str) -> ModelInfo | None:
    """Price and limits of `model` in litellm's map; tries the name without a provider prefix."""
    table = _price_map()
    entry = table.get(model) or table.get(model.split("/", 1)[-1])
    if entry is None:
        return None
    price = _by_prompt_length(entry) or _tiered(entry, "")
    if price is None:
        return None
    price = replace(
        price,
        batch=_tiered(entry, "_batches"),
        flex=_tiered(entry, "_flex"),
        priority=_tiered(entry, "_priority"),
        ultrafast=_tiered(entry, "_ultrafast"),
        premiums=_premiums(entry),
    )
    price = replace(price, off_peak=_off_peak(entry, price))
    search = entry.get("search_context_cost_per_query")
    searches = [Decimal(str(v)) for v in (search.values() if isinstance(search, dict) else [search]) if v is not None]
    uplifts = (
        (region, _dec(entry.get(key)))
        for region, key in (
            ("eu", "regional_processing_uplift_multiplier_eu"),
            ("us", "regional_processing_uplift_multiplier_us"),
            ("fedramp", "fedramp_uplift_multiplier"),
        )
    )
    return ModelInfo(
        price,
        entry.get("max_output_tokens"),
        entry.get("max_input_tokens"),
        entry.get("supports_reasoning") is True,
        max(searches, default=None),
        tuple((region, factor) for region, factor in uplifts if factor is not None),
    )


def _off_peak(entry: dict, price: Price) -> OffPeak | None:
    """litellm's `off_peak_pricing`: its hours (`hours_utc` every day, `windows` by weekday), and
    its rates; a rate it leaves out is the standard one."""
    named = entry.get("off_peak_pricing")
    if not isinstance(named, dict):
        return None

    def rate(name: str, standard: Decimal | None) -> Decimal | None:
        own = _dec(named.get(name))
        return own if own is not None else standard

    cheaper = Price(
        rate("input_cost_per_token", price.input) or ZERO,
        rate("output_cost_per_token", price.output) or ZERO,
        rate("cache_read_input_token_cost", price.cached_input),
        rate("output_cost_per_reasoning_token", price.reasoning_output),
        rate("cache_creation_input_token_cost", price.cache_write),
        rate("cache_creation_input_token_cost", price.cache_write_1h),
    )
    windows = named.get("windows")
    rules: list[object] = list(windows) if isinstance(windows, list) else []
    by_weekday = tuple(
        (_weekdays(rule.get("weekdays")), _windows(rule.get("hours_utc"))) for rule in rules if isinstance(rule, dict)
    )
    zone = named.get("weekday_timezone")
    return OffPeak(cheaper, _windows(named.get("hours_utc")), by_weekday, zone if isinstance(zone, str) else None)


WINDOW = re.compile(r"\s*(\d{1,2}):(\d{2})\s*-\s*(\d{1,2}):(\d{2})\s*")


def _windows(hours: object) -> tuple[Window, ...]:
    """`"HH:MM-HH:MM"` or a list of them, as minutes of the day; malformed ones left out."""
    listed: list[object] = [hours] if isinstance(hours, str) else list(hours) if isinstance(hours, list) else []
    found: list[Window] = []
    for window in listed:
        match = WINDOW.fullmatch(window) if isinstance(window, str) else None
        if match is not None:
            h1, m1, h2, m2 = map(int, match.groups())
            if h1 < 24 and h2 < 24 and m1 < 60 and m2 < 60:
                found.append((h1 * 60 + m1, h2 * 60 + m2))
    return tuple(found)


WEEKDAYS = {"mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6, "sun": 7}


def _weekdays(days: object) -> frozenset[int] | None:
    """ISO weekdays (1 Monday .. 7 Sunday, or their names); None (absent): every day."""
    if days is None:
        return None
    if not isinstance(days, list):
        return frozenset()
    found = set()
    for day in days:
        if isinstance(day, int) and not isinstance(day, bool) and 1 <= day <= 7:
            found.add(day)
        elif isinstance(day, str) and day.strip().lower()[:3] in WEEKDAYS:
            found.add(WEEKDAYS[day.strip().lower()[:3]])
    return frozenset(found)


def _premiums(entry: dict) -> tuple[tuple[str, Decimal], ...]:
    """An Anthropic model's premiums (`provider_specific_entry`: `{"us": 1.1, "fast": 2}`), which
    litellm's cost calculator applies to its calls; on Bedrock (Anthropic's models there) the
    regions' only, as litellm's Bedrock calculator applies them. Other providers' entries there
    are not prices (`realtime_ga_only`, a count of free images) and are not read."""
    named, provider = entry.get("provider_specific_entry"), entry.get("litellm_provider")
    if provider not in ("anthropic", "bedrock") or not isinstance(named, dict):
        return ()
    speeds = provider == "anthropic"
    return tuple(
        (name.lower(), Decimal(str(f)))
        for name, f in sorted(named.items())
        if isinstance(f, int | float) and not isinstance(f, bool) and f > 0 and (speeds or name != FAST)
    )


def _by_prompt_length(entry: dict) -> Price | None:
    """A `tiered_pricing` table (Alibaba's Qwen models, Volcengine's, OpenCode Go's): the tier
    whose range holds the prompt's length (`start < tokens <= end`; past the last, the last)
    prices every token of the call, as litellm's calculator reads it: the long-prompt prices of
    `Price.for_prompt`. A rate the tier leaves out is its input rate (cache reads and writes)
    or the model's own output rate; None without a tier that prices input."""
    tiers = sorted(
        (int(t["range"][0]), t)
        for t in entry.get("tiered_pricing") or ()
        if isinstance(t, dict)
        and _dec(t.get("input_cost_per_token")) is not None
        and isinstance(t.get("range"), list)
        and len(t["range"]) == 2
    )
    if not tiers:
        return None

    def price(tier: dict) -> Price:
        tier_input = _dec(tier["input_cost_per_token"])
        assert tier_input is not None
        output = _dec(tier.get("output_cost_per_token"))
        output = output if output is not None else (_dec(entry.get("output_cost_per_token")) or ZERO)
        read, write = (_dec(tier.get(k)) for k in ("cache_read_input_token_cost", "cache_creation_input_token_cost"))
        write = write if write is not None else tier_input
        return Price(
            tier_input,
            output,
            read if read is not None else tier_input,
            _dec(tier.get("output_cost_per_reasoning_token")),
            write,
            write,  # one write rate whatever its TTL: these providers sell no 1-hour write apart
        )

    (_, first), *longer = tiers
    return replace(price(first), long_context=tuple(LongContext(start, price(t)) for start, t in longer))


LONG_CONTEXT_KEY = re.compile(r"^input_cost_per_token(_above_(\d+)(k?)_tokens)$")


def _tiered(entry: dict, suffix: str) -> Price | None:
    """`_rates` at `suffix`, with the long-context prices the map gives (`..._above_200k_tokens`,
    read as litellm reads them: over the threshold every token is billed at the rates above it)."""
    price = _rates(entry, suffix)
    if price is None:
        return None
    found = sorted(
        (int(m[2]) * (1000 if m[3] else 1), m[1]) for m in map(LONG_CONTEXT_KEY.match, entry) if m is not None
    )
    long_context = tuple(LongContext(tokens, over) for tokens, above in found if (over := _rates(entry, suffix, above)))
    return replace(price, long_context=long_context)


def _rates(entry: dict, suffix: str, above: str = "") -> Price | None:
    """The map's rates with `suffix` (``, `_batches`, `_flex`); None without that tier's input
    rate. A tier's cache rate the map lacks is the list cache rate at the tier's discount on
    input: providers apply their batch discount to every kind of token (Anthropic, OpenAI).
    With `above` (`_above_200k_tokens`), a long prompt's rates: each the map's rate above the
    threshold, at the tier's discount where the tier has none of its own, else (a kind of token
    the map prices the same either side) the rate below it."""
    plain_input = _dec(entry.get("input_cost_per_token"))
    tier_input = _dec(entry.get("input_cost_per_token" + suffix))
    if tier_input is None or not plain_input:
        return None
    ratio = tier_input / plain_input

    def rate(name: str) -> Decimal | None:
        for kind in (name + above, name) if above else (name,):
            own, plain = _dec(entry.get(kind + suffix)), _dec(entry.get(kind))
            if own is not None:
                return own
            if plain is not None:
                return plain * ratio
        return None

    return Price(
        rate("input_cost_per_token") or ZERO,
        rate("output_cost_per_token") or ZERO,
        rate("cache_read_input_token_cost"),
        rate("output_cost_per_reasoning_token"),
        rate("cache_creation_input_token_cost"),
        rate("cache_creation_input_token_cost_above_1hr"),
    )


def format_usd(amount: Decimal) -> str:
    """Decimal dollars as a plain string without exponent (`0.00000015`, not `1.5E-7`)."""
    text = format(amount.normalize(), "f")
    return "0" if text in ("-0", "") else text
