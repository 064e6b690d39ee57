"""litellm's bundled price map, read into `Price`s: a model's list rates, its tiers' (batch,
flex, priority, ultrafast), its long-prompt rates (`_above_200k_tokens` keys, or a
`tiered_pricing` table), its premiums (Anthropic's regions and fast mode), its off-peak hours
(DeepSeek's) and OpenAI's regional hosts' uplift, each as litellm's own cost calculator reads
them. The map is read as a JSON file, so litellm is never imported and never reaches the
network.
"""

from __future__ import annotations

import importlib.util
import json
import re
from dataclasses import dataclass, replace
from decimal import Decimal
from functools import cache
from pathlib import Path

from policies.pricing import FAST, ZERO, LongContext, OffPeak, Price, Window


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


@cache  # the map does not change while the process runs; a deployment asks for its model 3 times
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
        (
            (int(t["range"][0]), t)
            for t in entry.get("tiered_pricing") or ()
            if isinstance(t, dict)
            and _dec(t.get("input_cost_per_token")) is not None
            and isinstance(t.get("range"), list)
            and len(t["range"]) == 2
            and all(isinstance(end, int | float) and not isinstance(end, bool) for end in t["range"])
        ),
        key=lambda start_tier: start_tier[0],
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
