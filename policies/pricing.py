"""Prices in dollars per token, and the cost of a call: pure functions over Decimal.

Prices come from litellm's bundled price map (read as a JSON file, so litellm is never
imported and never reaches the network) and are overridden per model by the config.
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass
from decimal import Decimal
from functools import cache
from pathlib import Path

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


@dataclass(frozen=True, slots=True)
class Price:
    """Dollars per token. `cached_input` applies to prompt tokens the upstream served from its
    cache, `reasoning_output` to output tokens a model spent reasoning; None: the plain rate."""

    input: Decimal
    output: Decimal
    cached_input: Decimal | None = None
    reasoning_output: Decimal | None = None

    @classmethod
    def per_million(
        cls,
        input_per_mtok: Decimal,
        output_per_mtok: Decimal,
        cached_input_per_mtok: Decimal | None = None,
        reasoning_output_per_mtok: Decimal | None = None,
    ) -> Price:
        return cls(
            Decimal(input_per_mtok) / MILLION,
            Decimal(output_per_mtok) / MILLION,
            _per_token(cached_input_per_mtok),
            _per_token(reasoning_output_per_mtok),
        )

    def scaled(self, factor: Decimal) -> Price:
        return Price(
            self.input * factor,
            self.output * factor,
            None if self.cached_input is None else self.cached_input * factor,
            None if self.reasoning_output is None else self.reasoning_output * factor,
        )


def _per_token(per_mtok: Decimal | None) -> Decimal | None:
    return None if per_mtok is None else Decimal(per_mtok) / MILLION


FREE = Price(ZERO, ZERO)


@dataclass(frozen=True, slots=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0  # the part of prompt_tokens the upstream served from its prompt cache
    reasoning_tokens: int = 0  # the part of completion_tokens the model spent reasoning

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def cost_of(usage: Usage, price: Price) -> Decimal:
    """The exact dollar cost of one call: cached prompt tokens and reasoning output tokens at their
    own rates where the price has them (as litellm's cost calculator prices them), the rest at
    the plain rates."""
    cached = min(usage.cached_tokens, usage.prompt_tokens) if price.cached_input is not None else 0
    reasoning = min(usage.reasoning_tokens, usage.completion_tokens) if price.reasoning_output is not None else 0
    cost = (usage.prompt_tokens - cached) * price.input + (usage.completion_tokens - reasoning) * price.output
    if cached:
        cost += cached * price.cached_input  # type: ignore[operator]
    if reasoning:
        cost += reasoning * price.reasoning_output  # type: ignore[operator]
    return cost


def worst_case_cost(prompt_tokens: int, max_output_tokens: int, price: Price) -> Decimal:
    """The most a call can cost: every prompt token uncached, every allowed output token used."""
    return prompt_tokens * price.input + max_output_tokens * price.output


@dataclass(frozen=True, slots=True)
class ModelInfo:
    price: Price
    max_output_tokens: int | None
    max_input_tokens: int | None


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
    if entry is None or entry.get("input_cost_per_token") is None:
        return None
    price = Price(
        _dec(entry["input_cost_per_token"]) or ZERO,
        _dec(entry.get("output_cost_per_token")) or ZERO,
        _dec(entry.get("cache_read_input_token_cost")),
        _dec(entry.get("output_cost_per_reasoning_token")),
    )
    return ModelInfo(price, entry.get("max_output_tokens"), entry.get("max_input_tokens"))


def format_usd(amount: Decimal) -> str:
    """Decimal dollars as a plain string without exponent (`0.00000015`, not `1.5E-7`)."""
    text = format(amount.normalize(), "f")
    return "0" if text in ("-0", "") else text
