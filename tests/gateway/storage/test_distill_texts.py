"""Kept request text for distillation (gateway/storage/distill_texts.py) on a real SQLite file:
`keep` writes off the request's path and `drain` waits for it; `rows` gives a cascade's rows
oldest first, as kept, for the teams asked for (by name or id), leaving out answers the team
reported wrong; a write that fails is logged, never raised into the request; `purge` keeps
each team's text for its days only, and nothing of a team that no longer keeps text."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from gateway.storage.db import create_engine
from gateway.storage.distill_texts import KeptText, TextStore
from gateway.storage.verdict_store import AnsweredRequest, FeedbackRow, FeedbackStore
from policies.answer_verdict import Verdict

QUESTION = [{"role": "user", "content": "¿por qué el cielo es azul?"}]  # kept as sent, not escaped


def kept(request_id: str, team: str = "a", cascade: str = "auto", source: str = "escalation") -> KeptText:
    return KeptText(
        cascade, source, request_id, f"team_{team}1", f"team-{team}", "large", QUESTION, f"answer {request_id}"
    )


@pytest.fixture
async def stores(tmp_path: Path) -> AsyncIterator[tuple[TextStore, FeedbackStore]]:
    engine = create_engine(f"sqlite:///{tmp_path / 'distill.db'}")
    texts, verdicts = TextStore(engine), FeedbackStore(engine)
    await verdicts.create()
    await texts.create()
    await texts.create()  # a second replica starting: nothing to do
    yield texts, verdicts
    await engine.dispose()


async def test_kept_rows_come_back_as_kept_oldest_first(stores: tuple[TextStore, FeedbackStore]) -> None:
    texts, _ = stores
    rows = [kept("req_1"), kept("req_2", source="shadow"), kept("req_3", cascade="other")]
    for row in rows:
        texts.keep(row)
    await texts.drain()
    found = await texts.rows("auto")
    assert [(r.request_id, r.source, r.messages, r.answer) for r in found] == [
        ("req_1", "escalation", QUESTION, "answer req_1"),
        ("req_2", "shadow", QUESTION, "answer req_2"),
    ]
    assert all(r.created_at > 0 for r in found)  # 0 on a new row means "now", stamped when written
    assert [r.request_id for r in await texts.rows("other")] == ["req_3"]


@pytest.mark.parametrize("teams", [["team-b"], ["team_b1"], ["team-b", "team-c"]])  # by name or by id
async def test_rows_of_the_teams_asked_for(stores: tuple[TextStore, FeedbackStore], teams: list[str]) -> None:
    texts, _ = stores
    for row in (kept("req_a", "a"), kept("req_b", "b")):
        await texts.add(row)
    assert [r.request_id for r in await texts.rows("auto", teams)] == ["req_b"]
    assert [r.request_id for r in await texts.rows("auto")] == ["req_a", "req_b"]


async def test_an_answer_reported_wrong_is_left_out(stores: tuple[TextStore, FeedbackStore]) -> None:
    texts, verdicts = stores
    for row in (kept("req_wrong"), kept("req_right"), kept("req_unjudged")):
        await texts.add(row)
    for request_id, verdict in (("req_wrong", Verdict.WRONG), ("req_right", Verdict.RIGHT)):
        answered = AnsweredRequest(request_id, "team_a1", "key_a1", "auto", "large", "miss", 1.0)
        await verdicts.record(FeedbackRow(answered, verdict, "key_a1", 2.0))
    assert [r.request_id for r in await texts.rows("auto")] == ["req_right", "req_unjudged"]


async def test_a_failed_write_is_logged_not_raised(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    engine = create_engine(f"sqlite:///{tmp_path / 'empty.db'}")
    texts = TextStore(engine)  # its table was never created
    with caplog.at_level(logging.ERROR, logger="costgate.distill"):
        texts.keep(kept("req_lost"))
        await texts.drain()
    assert [r.getMessage() for r in caplog.records] == ["could not keep a request's text"]
    await engine.dispose()


async def test_purge_deletes_what_is_past_its_teams_days_and_teams_no_longer_kept(
    stores: tuple[TextStore, FeedbackStore],
) -> None:
    texts, _ = stores
    await purge_and_check(texts)


def test_purge_on_postgresql() -> None:
    from tests.gateway.budget_support import fresh_postgres

    async def check(url: str) -> None:
        engine = create_engine(url)
        try:
            texts = TextStore(engine)
            await FeedbackStore(engine).create()
            await texts.create()
            await purge_and_check(texts)
        finally:
            await engine.dispose()

    with fresh_postgres() as url:
        asyncio.run(check(url))


async def purge_and_check(texts: TextStore) -> None:
    now, day = 1_000_000_000.0, 86400.0
    rows = [
        replace(kept("a_new", "a"), created_at=now - 5 * day),
        replace(kept("a_old", "a"), created_at=now - 40 * day),
        replace(kept("b_mid", "b"), created_at=now - 40 * day),  # b keeps 90 days
        replace(kept("c_new", "c"), created_at=now - 1 * day),  # c no longer keeps text
    ]
    for row in rows:
        await texts.add(row)
    removed = await texts.purge({"team-a": 30, "team_b1": 90}, now)  # by name or by id
    assert removed == 2
    assert [r.request_id for r in await texts.rows("auto")] == ["a_new", "b_mid"]
    assert await texts.purge({"team-a": 30, "team_b1": 90}, now) == 0
    assert await texts.purge({}, now) == 2  # no team keeps text: nothing stays
    assert await texts.rows("auto") == []


async def test_retention_purges_at_start_and_a_failure_is_logged(
    stores: tuple[TextStore, FeedbackStore], caplog: pytest.LogCaptureFixture
) -> None:
    from gateway.storage.distill_texts import Retention

    texts, _ = stores
    await texts.add(replace(kept("gone", "a"), created_at=1.0))
    retention = Retention(texts, {"team-a": 30})
    await retention.start()
    assert await texts.rows("auto") == []
    await retention.stop()
    await texts.engine.dispose()
    texts.engine = create_engine("sqlite:////nonexistent-dir/x.db")
    with caplog.at_level(logging.ERROR, logger="costgate.distill"):
        assert await retention.purge_once() == 0
    assert "could not delete expired kept text" in caplog.text
