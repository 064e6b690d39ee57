"""Kept request text for distillation (issue 13, item 6), in the gateway's database.

Only for teams that opted in (`teams: {NAME: {keep_text: true}}`, docs/cascades.md): for each
request to a cascade that the last tier answered, one row with the request's messages as sent
upstream and the last tier's answer, from an escalation (the client got that answer) or from a
shadow sample (the client got a cheaper tier's). `costgate distill export` reads them. Nothing
else in the gateway keeps a request's text: the ledger keeps counts and costs only.

Writes leave the request's path: `keep` queues the insert on a task, and `drain` (at shutdown)
waits for the ones in flight. `purge` deletes what is past its team's `keep_text_days` and
everything of a team that no longer keeps text; `Retention` runs it at start and hourly.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    Column,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    and_,
    delete,
    exists,
    insert,
    or_,
    select,
    true,
)
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

from gateway.storage.migrate import upgrade_schema
from gateway.storage.verdict_store import feedback
from policies.answer_verdict import Verdict

log = logging.getLogger("costgate.distill")
metadata = MetaData()

distill_texts = Table(
    "distill_texts",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("cascade", String(200), nullable=False),
    Column("source", String(16), nullable=False),  # escalation | shadow
    Column("request_id", String(64), nullable=False),  # a shadow's is `<id>-shadow`
    Column("team_id", String(40), nullable=False),
    Column("team_name", String(200), nullable=False),
    Column("served_model", String(200), nullable=False),  # the last tier
    Column("created_at", Float, nullable=False),
    Column("messages", Text, nullable=False),  # JSON: the request's `messages`
    Column("answer", Text, nullable=False),
    Index("ix_distill_texts_cascade", "cascade", "id"),
)


@dataclass(frozen=True, slots=True)
class KeptText:
    cascade: str
    source: str
    request_id: str
    team_id: str
    team_name: str
    served_model: str
    messages: Any
    answer: str
    created_at: float = 0.0  # 0: now


class TextStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._tasks: set[asyncio.Task[None]] = set()

    async def create(self) -> None:
        """Every table at its newest revision, this one among them (gateway/storage/migrate.py)."""
        await upgrade_schema(self.engine)

    def keep(self, row: KeptText) -> None:
        """Insert `row` on a task of its own: the request does not wait for it."""
        task = asyncio.get_running_loop().create_task(self.add(row))
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("could not keep a request's text", exc_info=task.exception())

    async def drain(self) -> None:
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=30)

    async def add(self, row: KeptText) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(
                insert(distill_texts).values(
                    cascade=row.cascade,
                    source=row.source,
                    request_id=row.request_id,
                    team_id=row.team_id,
                    team_name=row.team_name,
                    served_model=row.served_model,
                    created_at=row.created_at or time.time(),
                    messages=json.dumps(row.messages, ensure_ascii=False),
                    answer=row.answer,
                )
            )

    async def purge(self, days: Mapping[str, float], now: float | None = None) -> int:
        """Delete the rows of teams not in `days` (by name or id) and those older than their
        team's days; how many went."""
        now = time.time() if now is None else now
        c = distill_texts.c
        team = [or_(c.team_name == name, c.team_id == name) for name in days]
        expired = [and_(t, c.created_at < now - d * 86400) for t, d in zip(team, days.values())]
        async with self.engine.begin() as conn:
            result = await conn.execute(delete(distill_texts).where(or_(~or_(*team), *expired) if team else true()))
        return int(result.rowcount or 0)

    async def rows(self, cascade: str, teams: Collection[str] | None = None) -> list[KeptText]:
        """The cascade's kept rows, oldest first, but for answers the team reported wrong
        (POST /v1/feedback; the feedback table must exist); with `teams`, only those teams' (by
        name or id)."""
        c = distill_texts.c
        reported_wrong = exists().where(
            feedback.c.request_id == c.request_id, feedback.c.verdict == Verdict.WRONG.value
        )
        query = select(distill_texts).where(c.cascade == cascade, ~reported_wrong).order_by(c.id)
        if teams is not None:
            names = list(teams)
            query = query.where(c.team_name.in_(names) | c.team_id.in_(names))
        async with self.engine.connect() as conn:
            found = (await conn.execute(query)).all()
        return [
            KeptText(
                r.cascade,
                r.source,
                r.request_id,
                r.team_id,
                r.team_name,
                r.served_model,
                json.loads(r.messages),
                r.answer,
                r.created_at,
            )
            for r in found
        ]


class Retention:
    """Applies `keep_text_days` (TextStore.purge) at start and every `every_s`; a failed purge is
    logged and tried again at the next."""

    def __init__(self, store: TextStore, days: Mapping[str, float], every_s: float = 3600.0) -> None:
        self.store, self.days, self.every_s = store, dict(days), every_s
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.purge_once()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def purge_once(self) -> int:
        try:
            removed = await self.store.purge(self.days)
        except SQLAlchemyError:
            log.exception("could not delete expired kept text (tried again in %.0f s)", self.every_s)
            return 0
        if removed:
            log.info("deleted %d rows of kept text past their team's keep_text_days or no longer kept", removed)
        return removed

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.every_s)
            await self.purge_once()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
