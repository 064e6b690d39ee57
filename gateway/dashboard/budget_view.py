"""Budget rows for the dashboard, read from GET /admin/budgets (DESIGN.md: "each budget with its
spend and reservations in the current period")."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from gateway.dashboard.charts import fraction, meter

ZERO = Decimal(0)
# Field names the admin API may use for the same quantity, first match wins.
SPENT = ("spent_usd", "spend_usd", "used_usd")
RESERVED = ("reserved_usd", "reservations_usd", "reserved")


@dataclass(frozen=True, slots=True)
class BudgetRow:
    scope: str
    subject: str  # a team's name where the subject is a team id
    period: str
    limit: Decimal
    spent: Decimal
    reserved: Decimal
    bar: str  # SVG meter: spent, then reserved, against the limit

    @property
    def used(self) -> float:
        return fraction(self.spent + self.reserved, self.limit)

    @property
    def level(self) -> str:
        """ok / warn / over: how a row is coloured."""
        ratio = (self.spent + self.reserved) / self.limit if self.limit > 0 else Decimal(1)
        return "over" if ratio >= 1 else "warn" if ratio >= Decimal("0.8") else "ok"


def _money(entry: Mapping[str, Any], names: tuple[str, ...]) -> Decimal:
    for name in names:
        if entry.get(name) is not None:
            try:
                return Decimal(str(entry[name]))
            except InvalidOperation:
                return ZERO
    return ZERO


def budget_rows(body: Any, team_names: Mapping[str, str]) -> list[BudgetRow]:
    entries = body.get("data", body.get("budgets", [])) if isinstance(body, dict) else body
    rows = []
    for e in entries if isinstance(entries, list) else []:
        limit, spent, reserved = _money(e, ("amount_usd",)), _money(e, SPENT), _money(e, RESERVED)
        subject = str(e.get("subject") or "")  # a team's or key's id, a user, a tag ("id" is the budget's own)
        if e.get("scope") == "team":
            subject = str(e.get("team_name") or team_names.get(subject, subject))
        bar = meter([("spent", spent, "spent"), ("reserved", reserved, "reserved")], limit)
        rows.append(BudgetRow(str(e.get("scope", "")), subject, str(e.get("period", "")), limit, spent, reserved, bar))
    return sorted(rows, key=lambda r: -r.used)
