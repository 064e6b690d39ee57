"""The cache per team (gateway/storage/cache_report.py) on real SQLite and PostgreSQL: answered
requests, hits and savings from the ledger, verdicts from the feedback table, in a window."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from decimal import Decimal
from pathlib import Path

import pytest
from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncEngine

from gateway.storage.cache_report import recent_hits, team_cache
from gateway.storage.db import create_engine, create_tables, ledger
from gateway.storage.verdict_store import AnsweredRequest, FeedbackRow, FeedbackStore
from policies.answer_verdict import Verdict
from tests.gateway.budget_support import fresh_postgres

PICO = 10**12


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'report.db'}"
    else:
        with fresh_postgres() as pg:
            yield pg


def row(request_id: str, team: str | None, cache: str, at: float, saved: Decimal = Decimal(0), status: int = 200):
    return {
        "request_id": request_id,
        "created_at": at,
        "day": "2026-01-01",
        "team_id": team,
        "endpoint": "chat.completions",
        "requested_model": "small",
        "served_model": "small",
        "latency_ms": 1.0,
        "cache_status": cache,
        "saved_pusd": int(saved * PICO),
        "status": status,
    }


@pytest.fixture
async def engine(url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(url)
    await create_tables(engine)
    store = FeedbackStore(engine)
    await store.create()
    rows = [
        row("a_miss", "team_a", "miss", 100.0),
        row("a_exact", "team_a", "exact", 101.0, Decimal("0.25")),
        row("a_sem", "team_a", "semantic", 102.0, Decimal("0.5")),
        row("a_sem2", "team_a", "semantic", 103.0, Decimal("0.125")),
        row("a_refused", "team_a", "miss", 104.0, status=429),  # never reached the cache
        row("a_old", "team_a", "exact", 10.0, Decimal("9")),  # before the window
        row("b_exact", "team_b", "exact", 105.0, Decimal("1")),
        row("nokey", None, "miss", 106.0),
    ]
    async with engine.begin() as conn:
        await conn.execute(insert(ledger), rows)
    for request_id, verdict in (("a_sem", "wrong"), ("a_exact", "right"), ("a_miss", "wrong"), ("a_old", "wrong")):
        r = next(x for x in rows if x["request_id"] == request_id)
        answered = AnsweredRequest(request_id, "team_a", None, "small", "small", r["cache_status"], r["created_at"])
        await store.record(FeedbackRow(answered, Verdict(verdict), "admin", 200.0))
    yield engine
    await engine.dispose()


async def test_per_team_hits_savings_and_verdicts_in_the_window(engine: AsyncEngine) -> None:
    a, b = await team_cache(engine, 50.0, 200.0)
    assert (a.team_id, a.requests, a.hits, a.saved) == ("team_a", 4, {"exact": 1, "semantic": 2}, Decimal("0.875"))
    assert (a.rate(), a.rate("exact"), a.rate("semantic")) == (0.75, 0.25, 0.5)
    assert a.reported_wrong == {"exact": 0, "semantic": 1}  # the miss reported wrong is no false hit
    assert a.reported_right == {"exact": 1, "semantic": 0}
    assert (a.false_hits, a.false_hit_rate) == (1, 1 / 3)
    assert (b.team_id, b.requests, b.hits["exact"], b.saved, b.false_hit_rate) == ("team_b", 1, 1, Decimal(1), 0.0)


async def test_recent_hits_newest_first_with_verdicts(engine: AsyncEngine) -> None:
    hits = await recent_hits(engine)
    assert [(h.request_id, h.kind, h.verdict) for h in hits] == [
        ("b_exact", "exact", None),
        ("a_sem2", "semantic", None),
        ("a_sem", "semantic", "wrong"),
        ("a_exact", "exact", "right"),
        ("a_old", "exact", "wrong"),
    ]
    mine = await recent_hits(engine, "team_a", limit=2)
    assert [(h.request_id, h.saved) for h in mine] == [("a_sem2", Decimal("0.125")), ("a_sem", Decimal("0.5"))]
