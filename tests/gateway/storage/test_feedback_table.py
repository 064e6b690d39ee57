"""Verdicts on served answers (gateway/storage/verdict_store.py) on real SQLite and PostgreSQL: one
verdict per request however many times and however concurrently it is reported, found only for
answered requests, and read back per team, per cascade and as a team's labelled pairs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from sqlalchemy import insert

from gateway.storage.db import create_engine, create_tables, ledger
from gateway.storage.verdict_store import AnsweredRequest, FeedbackRow, FeedbackStore, Recorded
from policies.answer_verdict import Verdict
from policies.semantic_cache.verifier_calibration import Labelled
from tests.gateway.budget_support import fresh_postgres


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'feedback.db'}"
    else:
        with fresh_postgres() as pg:
            yield pg


@pytest.fixture
async def store(url: str) -> AsyncIterator[FeedbackStore]:
    engine = create_engine(url)
    await create_tables(engine)
    s = FeedbackStore(engine)
    await s.create()
    await s.create()  # a second replica starting: nothing to do
    async with engine.begin() as conn:
        await conn.execute(
            insert(ledger),
            [
                ledger_row("req_hit", "team_a", "semantic", "small", "small", 100.0),
                ledger_row("req_cascade", "team_a", "miss", "auto", "large", 200.0),
                ledger_row("req_b", "team_b", "exact", "small", "small", 300.0),
                ledger_row("req_failed", "team_a", "miss", "small", None, 400.0, status=502),
            ],
        )
    yield s
    await engine.dispose()


def ledger_row(
    request_id: str, team: str, cache: str, asked: str, served: str | None, at: float, status: int = 200
) -> dict:
    return {
        "request_id": request_id,
        "created_at": at,
        "day": "2026-01-01",
        "team_id": team,
        "key_id": "key_1",
        "endpoint": "chat.completions",
        "requested_model": asked,
        "served_model": served,
        "latency_ms": 1.0,
        "cache_status": cache,
        "status": status,
    }


def verdict_on(request: AnsweredRequest, verdict: Verdict, pair: Labelled | None = None) -> FeedbackRow:
    return FeedbackRow(request, verdict, "key_1", 1000.0, "a comment", pair)


async def test_one_verdict_per_request_however_often_reported(store: FeedbackStore) -> None:
    hit = await store.answered("req_hit")
    assert hit == AnsweredRequest("req_hit", "team_a", "key_1", "small", "small", "semantic", 100.0)
    assert await store.answered("req_failed") is None and await store.answered("req_none") is None
    pair = Labelled("how can I x", "how do I x", False)
    outcomes = await asyncio.gather(*(store.record(verdict_on(hit, Verdict.WRONG, pair)) for _ in range(5)))
    assert sorted(o.value for o in outcomes) == ["new", "same", "same", "same", "same"]
    assert await store.record(verdict_on(hit, Verdict.RIGHT, pair)) is Recorded.CHANGED
    assert await store.record(verdict_on(hit, Verdict.RIGHT, pair)) is Recorded.SAME
    assert await store.verdicts_of(["req_hit", "req_b"]) == {"req_hit": Verdict.RIGHT}
    assert await store.labelled("team_a") == [Labelled("how can I x", "how do I x", True)]


async def test_reads_per_team_cascade_and_window(store: FeedbackStore) -> None:
    cascade, other = await store.answered("req_cascade"), await store.answered("req_b")
    assert cascade is not None and other is not None
    await store.record(verdict_on(cascade, Verdict.WRONG))
    await store.record(verdict_on(other, Verdict.WRONG))
    counts = {
        (c.team_id, c.requested_model, c.served_model, c.cache_status, c.verdict, c.count) for c in await store.counts()
    }
    assert counts == {
        ("team_a", "auto", "large", "miss", Verdict.WRONG, 1),
        ("team_b", "small", "small", "exact", Verdict.WRONG, 1),
    }
    assert [c.team_id for c in await store.counts(since=250.0)] == ["team_b"]
    assert [c.team_id for c in await store.counts(until=250.0)] == ["team_a"]
    rows = await store.verdicts(requested_model="auto")
    assert [(r.request.request_id, r.request.served_model, r.verdict, r.comment) for r in rows] == [
        ("req_cascade", "large", Verdict.WRONG, "a comment")
    ]
    assert [r.request.request_id for r in await store.verdicts()] == ["req_b", "req_cascade"]  # newest first
    assert await store.labelled("team_a") == []  # a miss has no pair
