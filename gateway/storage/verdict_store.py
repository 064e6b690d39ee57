"""Verdicts on served answers (POST /v1/feedback), one row per request, in the gateway's database.

A row says which request (and so which team, key, models and cache status, copied from its
ledger row) got which verdict. For a semantic hit it also keeps the pair the cache matched:
the question asked and the stored question whose answer was served, labelled by the verdict
(`wrong`: not the same question). Those pairs are the team's own labels for
`costgate cache calibrate --team`; verdicts on cascade answers are read by `counts` and
`verdicts` (a cascade is the `requested_model`, its tier the `served_model`).

A request has one verdict: the same one twice is kept once, another one replaces it.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Column, Float, Index, MetaData, String, Table, Text, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from gateway.storage.db import ledger
from gateway.storage.migrate import upgrade_schema
from policies.answer_verdict import Verdict, VerdictCount
from policies.semantic_cache.verifier_calibration import Labelled

metadata = MetaData()

feedback = Table(
    "feedback",
    metadata,
    Column("request_id", String(40), primary_key=True),
    Column("team_id", String(40), nullable=False),
    Column("key_id", String(40)),  # the key that made the request
    Column("reported_by", String(40), nullable=False),  # the key id that reported it, or "admin"
    Column("requested_model", String(200)),
    Column("served_model", String(200)),
    Column("cache_status", String(16), nullable=False),
    Column("verdict", String(8), nullable=False),
    Column("comment", Text),
    Column("query", Text),  # a semantic hit's pair: the question asked ...
    Column("stored", Text),  # ... and the stored question whose answer was served
    Column("requested_at", Float, nullable=False),  # the request's ledger created_at
    Column("updated_at", Float, nullable=False),
    Index("ix_feedback_team", "team_id", "requested_at"),
    Index("ix_feedback_model", "requested_model", "requested_at"),
)


@dataclass(frozen=True, slots=True)
class AnsweredRequest:
    """What the ledger knows of one request that was answered (a failed one has no answer to judge)."""

    request_id: str
    team_id: str
    key_id: str | None
    requested_model: str | None
    served_model: str | None
    cache_status: str
    created_at: float


@dataclass(frozen=True, slots=True)
class FeedbackRow:
    request: AnsweredRequest
    verdict: Verdict
    reported_by: str
    updated_at: float
    comment: str | None = None
    pair: Labelled | None = None  # a semantic hit's (query, stored) pair, labelled by the verdict


class Recorded(enum.Enum):
    NEW = "new"  # the request's first verdict
    CHANGED = "changed"  # it had the other verdict
    SAME = "same"  # it had this verdict already: nothing written


class FeedbackStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def create(self) -> None:
        """Every table at its newest revision, this one among them (gateway/storage/migrate.py)."""
        await upgrade_schema(self.engine)

    async def answered(self, request_id: str) -> AnsweredRequest | None:
        c = ledger.c
        query = select(
            c.request_id, c.team_id, c.key_id, c.requested_model, c.served_model, c.cache_status, c.created_at
        ).where(c.request_id == request_id, c.team_id.is_not(None), c.status < 400)
        async with self.engine.connect() as conn:
            r = (await conn.execute(query)).first()
        return (
            None
            if r is None
            else AnsweredRequest(
                r.request_id, r.team_id, r.key_id, r.requested_model, r.served_model, r.cache_status, r.created_at
            )
        )

    async def stored(self, request_id: str) -> tuple[str | None, float] | None:
        """The comment and time of the verdict stored for `request_id` (what a repeat answers with)."""
        async with self.engine.connect() as conn:
            r = (
                await conn.execute(
                    select(feedback.c.comment, feedback.c.updated_at).where(feedback.c.request_id == request_id)
                )
            ).first()
        return None if r is None else (r.comment, r.updated_at)

    async def record(self, row: FeedbackRow) -> Recorded:
        """Insert the verdict, or replace another one; a repeated verdict writes nothing."""
        values = _values(row)
        async with self.engine.begin() as conn:
            before = (
                await conn.execute(
                    select(feedback.c.verdict).where(feedback.c.request_id == row.request.request_id).with_for_update()
                )
            ).first()
            if before is None:
                inserted = await conn.execute(_insert_or_ignore(conn.dialect.name, values))
                if inserted.rowcount == 1:
                    return Recorded.NEW
                before = (
                    await conn.execute(
                        select(feedback.c.verdict).where(  # a report racing this one
                            feedback.c.request_id == row.request.request_id
                        )
                    )
                ).first()
            if before is not None and before.verdict == row.verdict.value:
                return Recorded.SAME
            await conn.execute(
                update(feedback)
                .where(feedback.c.request_id == row.request.request_id)
                .values(
                    verdict=values["verdict"],
                    comment=values["comment"],
                    reported_by=values["reported_by"],
                    updated_at=values["updated_at"],
                )
            )
            return Recorded.CHANGED

    # the read interface (dashboard, `costgate cache calibrate --team`, cascades)
    async def counts(
        self, team_id: str | None = None, since: float | None = None, until: float | None = None
    ) -> list[VerdictCount]:
        """Verdicts per team, requested model (a cascade's name), served model, cache status and
        verdict, for requests made in [since, until)."""
        f = feedback.c
        groups = (f.team_id, f.requested_model, f.served_model, f.cache_status, f.verdict)
        query = select(*groups, func.count().label("n")).where(*_filters(team_id, since, until)).group_by(*groups)
        async with self.engine.connect() as conn:
            rows = list(await conn.execute(query))
        return [
            VerdictCount(r.team_id, r.requested_model, r.served_model, r.cache_status, Verdict(r.verdict), int(r.n))
            for r in rows
        ]

    async def answered_counts(self, requested_model: str, served_model: str) -> dict[str, int]:
        """Per team, the fresh answers (not cache hits) `served_model` gave to requests for
        `requested_model`: what each team's verdicts on them are weighed by."""
        c = ledger.c
        query = (
            select(c.team_id, func.count().label("n"))
            .where(
                c.requested_model == requested_model,
                c.served_model == served_model,
                c.cache_status == "miss",
                c.status < 400,
                c.team_id.is_not(None),
            )
            .group_by(c.team_id)
        )
        async with self.engine.connect() as conn:
            return {r.team_id: int(r.n) for r in await conn.execute(query)}

    async def labelled(self, team_id: str) -> list[Labelled]:
        """The team's semantic hits with a verdict, as labelled pairs (wrong: not the same)."""
        f = feedback.c
        query = (
            select(f.query, f.stored, f.verdict)
            .where(f.team_id == team_id, f.query.is_not(None), f.stored.is_not(None))
            .order_by(f.requested_at)
        )
        async with self.engine.connect() as conn:
            rows = list(await conn.execute(query))
        return [Labelled(r.query, r.stored, r.verdict == Verdict.RIGHT.value) for r in rows]

    async def verdicts(
        self,
        requested_model: str | None = None,
        team_id: str | None = None,
        since: float | None = None,
        limit: int = 10_000,
    ) -> list[FeedbackRow]:
        """The newest verdicts (at most `limit`), newest first, on requests for one model or cascade
        name, one team, or all; join them to shadow samples by request id."""
        conditions = list(_filters(team_id, since, None))
        if requested_model is not None:
            conditions.append(feedback.c.requested_model == requested_model)
        query = select(feedback).where(*conditions).order_by(feedback.c.requested_at.desc()).limit(limit)
        async with self.engine.connect() as conn:
            rows = list(await conn.execute(query))
        return [_row(r) for r in rows]

    async def verdicts_of(self, request_ids: Sequence[str]) -> dict[str, Verdict]:
        """The verdict of each of these requests that has one."""
        found: dict[str, Verdict] = {}
        async with self.engine.connect() as conn:
            for i in range(0, len(request_ids), 500):
                query = select(feedback.c.request_id, feedback.c.verdict).where(
                    feedback.c.request_id.in_(request_ids[i : i + 500])
                )
                found.update((r.request_id, Verdict(r.verdict)) for r in await conn.execute(query))
        return found


def _values(row: FeedbackRow) -> dict[str, object]:
    r = row.request
    return {
        "request_id": r.request_id,
        "team_id": r.team_id,
        "key_id": r.key_id,
        "reported_by": row.reported_by,
        "requested_model": r.requested_model,
        "served_model": r.served_model,
        "cache_status": r.cache_status,
        "verdict": row.verdict.value,
        "comment": row.comment,
        "requested_at": r.created_at,
        "updated_at": row.updated_at,
        "query": row.pair.query if row.pair else None,
        "stored": row.pair.stored if row.pair else None,
    }


def _insert_or_ignore(dialect: str, values: dict[str, object]):
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert(feedback).values(values).on_conflict_do_nothing(index_elements=["request_id"])
    if dialect == "sqlite":
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        return sqlite_insert(feedback).values(values).on_conflict_do_nothing(index_elements=["request_id"])
    return insert(feedback).values(values)


def _filters(team_id: str | None, since: float | None, until: float | None) -> list:
    f = feedback.c
    out = []
    if team_id is not None:
        out.append(f.team_id == team_id)
    if since is not None:
        out.append(f.requested_at >= since)
    if until is not None:
        out.append(f.requested_at < until)
    return out


def _row(r) -> FeedbackRow:
    request = AnsweredRequest(
        r.request_id, r.team_id, r.key_id, r.requested_model, r.served_model, r.cache_status, r.requested_at
    )
    verdict = Verdict(r.verdict)
    pair = None if r.query is None or r.stored is None else Labelled(r.query, r.stored, verdict is Verdict.RIGHT)
    return FeedbackRow(request, verdict, r.reported_by, r.updated_at, r.comment, pair)
