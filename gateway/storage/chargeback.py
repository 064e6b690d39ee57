"""Chargeback views of the ledger: one transaction (a trace), and a month's invoice lines.

Invoice lines are grouped by team, model and the request's whole tag set (`a+b` for a request
tagged a and b), so every request's cost lands on exactly one line and a team's lines add up
to its spend. Splitting a multi-tag request's cost between its tags would need rounding;
listing it under each tag would count it twice.

The CSV is opened in spreadsheets, and its text cells hold names teams chose (the team's name,
its tags, the model it asked for), so every text cell is written as OWASP advises against CSV
injection: quoted, and with a leading `'` when it begins with a character a spreadsheet reads as
a formula. Number cells are written bare, so they stay numbers (a negative one too).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from gateway.storage.db import ledger, teams
from policies.pricing import format_usd, from_pico

MODEL = func.coalesce(ledger.c.served_model, ledger.c.requested_model)


@dataclass(frozen=True, slots=True)
class TraceCall:
    request_id: str
    created_at: float
    team_id: str | None
    key_id: str | None
    requested_model: str | None
    served_model: str | None
    prompt_tokens: int
    completion_tokens: int
    cost_usd: Decimal
    cache_status: str
    status: int

    def json(self) -> dict[str, object]:
        return {
            "request_id": self.request_id,
            "created_at": self.created_at,
            "team_id": self.team_id,
            "key_id": self.key_id,
            "requested_model": self.requested_model,
            "model": self.served_model,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost_usd": format_usd(self.cost_usd),
            "cache": self.cache_status,
            "status": self.status,
        }


async def trace(engine: AsyncEngine, trace_id: str) -> list[TraceCall]:
    query = select(ledger).where(ledger.c.trace_id == trace_id).order_by(ledger.c.created_at)
    async with engine.connect() as conn:
        rows = await conn.execute(query)
    return [
        TraceCall(
            r.request_id,
            r.created_at,
            r.team_id,
            r.key_id,
            r.requested_model,
            r.served_model,
            r.prompt_tokens,
            r.completion_tokens,
            from_pico(r.cost_pusd),
            r.cache_status,
            r.status,
        )
        for r in rows
    ]


CSV_HEADER = [
    "month",
    "team_id",
    "team",
    "model",
    "tags",
    "requests",
    "prompt_tokens",
    "completion_tokens",
    "cost_usd",
    "saved_usd",
]


async def chargeback_csv(engine: AsyncEngine, month: str) -> str:
    """The invoice lines of `month` (YYYY-MM, UTC days) as CSV: the costliest team first (ties
    by team id), each team's lines by model and tags."""
    query = (
        select(
            ledger.c.team_id,
            teams.c.name,
            MODEL.label("model"),
            ledger.c.tags,
            func.count().label("requests"),
            func.sum(ledger.c.prompt_tokens).label("pt"),
            func.sum(ledger.c.completion_tokens).label("ct"),
            func.sum(ledger.c.cost_pusd).label("cost"),
            func.sum(ledger.c.saved_pusd).label("saved"),
        )
        .select_from(ledger.outerjoin(teams, teams.c.id == ledger.c.team_id))
        .where(ledger.c.day.like(month + "-%"))
        .group_by(ledger.c.team_id, teams.c.name, MODEL, ledger.c.tags)
        .order_by(ledger.c.team_id, MODEL, ledger.c.tags)
    )
    async with engine.connect() as conn:
        rows = list(await conn.execute(query))
    team_cost: dict[str | None, int] = {}
    for r in rows:
        team_cost[r.team_id] = team_cost.get(r.team_id, 0) + int(r.cost or 0)
    rows.sort(key=lambda r: -team_cost[r.team_id])  # stable: the query's order within a team
    lines = [",".join(spreadsheet_text(name) for name in CSV_HEADER)]
    for r in rows:
        tags = "+".join((r.tags or ",,").strip(",").split(",")) if r.tags else ""
        text = [spreadsheet_text(cell) for cell in (month, r.team_id or "", r.name or "", r.model or "", tags)]
        numbers = [str(int(n or 0)) for n in (r.requests, r.pt, r.ct)]
        dollars = [format_usd(from_pico(int(pico or 0))) for pico in (r.cost, r.saved)]
        lines.append(",".join(text + numbers + dollars))
    return "".join(line + "\n" for line in lines)


# What Excel, LibreOffice and Google Sheets read as the start of a formula (OWASP's list, with
# LF, which some of them treat like CR). Leading spaces are looked through: some apps drop them.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\n")


def spreadsheet_text(value: str) -> str:
    """One text cell no spreadsheet runs: a leading `'` when it begins like a formula, then
    quoted with its quotes doubled, so a `,` or `"` inside cannot start a cell of its own."""
    if value.lstrip(" ").startswith(FORMULA_STARTS):
        value = "'" + value
    return '"' + value.replace('"', '""') + '"'
