"""The ledger against a provider's own cost report, per model and day: pure arithmetic.

Both sides arrive as dollars by (day, model). A provider names models its own way (with a
release date: `gpt-4o-mini-2024-07-18`, `claude-sonnet-4-5-20250929`), a config its own
(`anthropic/claude-sonnet-4-5`), so both are compared under `model_family`: no provider prefix,
no trailing date.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal

ZERO = Decimal(0)
CENT = Decimal("0.01")
TRAILING_DATE = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{8})$")


def model_family(name: str) -> str:
    """`openai/gpt-4o-mini-2024-07-18` -> `gpt-4o-mini`; `claude-sonnet-4-5-20250929` -> `claude-sonnet-4-5`."""
    base = name.strip().lower().rsplit("/", 1)[-1]
    return TRAILING_DATE.sub("", base)


@dataclass(frozen=True, slots=True)
class Line:
    day: str
    model: str
    ledger_usd: Decimal
    provider_usd: Decimal

    @property
    def difference_usd(self) -> Decimal:
        """The provider's bill minus the ledger: positive where the ledger under-reports."""
        return self.provider_usd - self.ledger_usd

    @property
    def matches(self) -> bool:
        """Equal to the cent (a provider reports cents, or fractions of them)."""
        return abs(self.difference_usd) < CENT


Keyed = Mapping[tuple[str, str], Decimal]


def reconcile(ledger: Keyed, provider: Keyed) -> list[Line]:
    """One line per (day, model) on either side, by day then model; a side without it shows 0."""
    keys = sorted(set(ledger) | set(provider))
    return [Line(day, model, ledger.get((day, model), ZERO), provider.get((day, model), ZERO)) for day, model in keys]


def summed(amounts: Iterable[tuple[tuple[str, str], Decimal]]) -> dict[tuple[str, str], Decimal]:
    """Amounts added up under their (day, model) keys."""
    out: dict[tuple[str, str], Decimal] = {}
    for key, usd in amounts:
        out[key] = out.get(key, ZERO) + usd
    return out


def by_family(amounts: Mapping[tuple[str, str], Decimal]) -> dict[tuple[str, str], Decimal]:
    """The same amounts summed under each model's family."""
    return summed(((day, model_family(model)), usd) for (day, model), usd in amounts.items())
