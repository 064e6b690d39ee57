"""The dashboard's figures equal the ledger's, with closed days read from the daily roll-up,
on SQLite and on PostgreSQL."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from dataclasses import asdict, replace
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import asyncpg
import pytest
from sqlalchemy import func, insert, select

from gateway.dashboard.queries import DashboardQueries
from gateway.dashboard.rollup import GRACE_S, STEP_S, Rollup, Window, ledger_daily
from gateway.storage.db import create_engine, create_tables, ledger
from gateway.storage.ledger import LedgerRow
from policies.pricing import Price, from_pico

PG = "postgresql://postgres@127.0.0.1:5432"
TODAY = date(2026, 11, 20)


def row(
    n: int,
    days_ago: int,
    team: str | None,
    model: str,
    cost_pusd: int,
    cache: str = "miss",
    status: int = 200,
    requested: str | None = None,
    saved_pusd: int = 0,
) -> LedgerRow:
    day = TODAY - timedelta(days=days_ago)
    created = datetime(day.year, day.month, day.day, 12, tzinfo=UTC).timestamp() + n
    return LedgerRow(
        f"req_{n}",
        created,
        day.isoformat(),
        team,
        "key_1" if team else None,
        None,
        None,
        None,
        "chat.completions",
        requested or model,
        model,
        "openai",
        10,
        5,
        0,
        cost_pusd,
        saved_pusd,
        12.0,
        None,
        cache,
        status,
        None,
    )


ROWS = [
    row(1, 0, "team_a", "small", 1_000_000),
    row(2, 0, "team_b", "large", 9_000_000),
    row(3, 1, "team_a", "small", 2_000_000, cache="exact", saved_pusd=2_000_000),
    row(4, 3, "team_a", "large", 4_000_000),
    row(5, 3, "team_b", "small", 500_000, status=500),
    row(6, 6, "team_b", "large", 7_000_000, requested="auto"),
    row(7, 6, None, "small", 0, status=401),
    row(8, 6, "team_a", "small", 100_000, requested="auto", cache="semantic", saved_pusd=3_000_000),
    row(9, 40, "team_a", "small", 123_456_789),  # outside a 30-day window
]


async def _postgres(name: str, sql: str) -> None:
    conn = await asyncpg.connect(PG + "/postgres")
    try:
        await conn.execute(sql.format(name=name))
    finally:
        await conn.close()


@pytest.fixture(params=["sqlite", "postgresql"])
async def engine(request, tmp_path) -> AsyncIterator:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/dash.db"
    else:
        name = "costgate_dash_" + secrets.token_hex(4)
        await _postgres(name, "CREATE DATABASE {name}")
        url = f"{PG}/{name}"
    eng = create_engine(url)
    await create_tables(eng)
    async with eng.begin() as conn:
        await conn.execute(insert(ledger), [asdict(r) for r in ROWS])
    yield eng
    await eng.dispose()
    if request.param == "postgresql":
        await _postgres(name, "DROP DATABASE {name} WITH (FORCE)")


def expected(rows: list[LedgerRow], window: Window) -> dict[str | None, Decimal]:
    out: dict[str | None, Decimal] = {}
    for r in rows:
        if window.first <= r.day <= window.last:
            out[r.team_id] = out.get(r.team_id, Decimal(0)) + from_pico(r.cost_pusd)
    return out


NOW = datetime(TODAY.year, TODAY.month, TODAY.day, 18, tzinfo=UTC).timestamp()


async def test_figures_match_the_ledger_before_and_after_rolling_up(engine) -> None:
    window = Window(TODAY, 30)
    queries = DashboardQueries(engine)
    want = expected(ROWS, window)
    live_only = (await queries.summary(window)).totals()  # nothing rolled yet: all live
    assert await queries.rollup.advance(NOW)
    assert not await queries.rollup.advance(NOW + STEP_S)  # not due again yet
    assert await queries.rollup.mark() == NOW - GRACE_S
    summary = await queries.summary(window)
    assert summary.totals() == live_only
    spenders = summary.top_spenders({"team_a": "A", "team_b": "B"})
    assert {s.team: s.cost for s in spenders} == {"A": want["team_a"], "B": want["team_b"], "(no key)": Decimal(0)}
    assert [s.team for s in spenders][:2] == ["B", "A"]
    totals = summary.totals()
    assert (totals.requests, totals.errors) == (8, 2)
    assert totals.cost == sum(want.values(), Decimal(0))
    assert totals.saved == from_pico(5_000_000)
    async with engine.connect() as conn:
        rolled = (await conn.execute(select(func.sum(ledger_daily.c.requests)))).scalar()
    assert rolled == len(ROWS)  # every row is older than the grace period, the one outside the window too


async def test_series_cache_and_cascades(engine) -> None:
    window = Window(TODAY, 7)
    queries = DashboardQueries(engine)
    await queries.rollup.advance(NOW)
    by_model = {s.name: s.values for s in await queries.spend_series(window, "served_model", {})}
    labels = window.labels()
    assert by_model["large"][labels.index((TODAY - timedelta(days=6)).isoformat())] == from_pico(7_000_000)
    assert by_model["large"][-1] == from_pico(9_000_000)
    summary = await queries.summary(window)
    cache = summary.cache()
    assert cache.hits == {"exact": 1, "semantic": 1} and cache.requests == 6  # 8, of which 2 refused
    assert cache.hit_rate == 2 / 6 and cache.saved == from_pico(5_000_000)
    prices = {"large": Price.per_million(Decimal(2), Decimal(8))}
    (auto,) = summary.cascades([("auto", ("small", "large"))], prices)
    assert auto.requests == 1 and auto.by_tier == {"large": 1}  # the semantic hit ran no tier
    assert auto.escalation_rate == 1.0 and auto.estimated_saving == 0  # the last tier answered: nothing saved
    (cheap,) = summary.cascades([("small", ("small", "large"))], prices)  # rows asked of "small", read as a cascade
    answered_small = [
        r
        for r in ROWS
        if r.requested_model == "small"
        and r.served_model == "small"
        and r.cache_status == "miss"
        and "2026-11-14" <= r.day
        and r.status < 400
    ]
    assert cheap.estimated_saving == sum(
        (
            Decimal(r.prompt_tokens * 2 + r.completion_tokens * 8) / 10**6 - from_pico(r.cost_pusd)
            for r in answered_small
        ),
        Decimal(0),
    )
    assert summary.cascades([("auto", ("small", "large"))], {})[0].estimated_saving is None


async def add(engine, *rows: LedgerRow) -> None:
    async with engine.begin() as conn:
        await conn.execute(insert(ledger), [asdict(r) for r in rows])


async def test_new_rows_are_live_then_rolled_and_racing_replicas_add_nothing_twice(engine) -> None:
    window = Window(TODAY, 7)
    queries = DashboardQueries(engine)
    await queries.rollup.advance(NOW)
    before = (await queries.summary(window)).totals().cost
    fresh = replace(row(10, 0, "team_a", "small", 7), request_id="req_10", created_at=NOW + 10)
    await add(engine, fresh)
    assert (await queries.summary(window)).totals().cost == before + from_pico(7)  # live
    later = NOW + GRACE_S + 600
    results = await asyncio.gather(*(Rollup(engine).advance(later) for _ in range(4)))
    assert sum(results) >= 1
    assert await queries.rollup.mark() == later - GRACE_S
    assert (await queries.summary(window)).totals().cost == before + from_pico(7)  # rolled, once
    async with engine.connect() as conn:
        rolled = (await conn.execute(select(func.sum(ledger_daily.c.requests)))).scalar()
    assert rolled == len(ROWS) + 1
    recent = await queries.recent({"team_a": "A"}, limit=2)
    assert [r.request_id for r in recent] == ["req_10", "req_2"]
    assert recent[0].team == "A" and recent[0].cost == from_pico(7)


async def test_a_row_older_than_the_grace_period_arriving_after_the_roll_up_is_left_out(engine) -> None:
    """The stated limit (rollup.py): such a row is in the ledger (and /admin/spend) only."""
    window = Window(TODAY, 7)
    queries = DashboardQueries(engine)
    await queries.rollup.advance(NOW)
    before = (await queries.summary(window)).totals()
    await add(engine, replace(row(11, 0, "team_a", "small", 5), request_id="req_11", created_at=NOW - GRACE_S - 1))
    await add(engine, replace(row(12, 0, "team_a", "small", 3), request_id="req_12", created_at=NOW - GRACE_S + 1))
    after = (await queries.summary(window)).totals()
    assert after.requests == before.requests + 1 and after.cost == before.cost + from_pico(3)
