"""Batches (`/v1/batches`) and their per-line progress, in the database, so a batch survives a
restart: the worker picks up every unfinished batch and runs only the lines with no result.

Invariants:
- a line's result is inserted once: (batch_id, line) is the primary key, and a second insert
  (a line re-run after a crash between its answer and its row) is ignored;
- one gateway replica runs a batch at a time: it holds a lease (`lease_owner`, `lease_until`)
  that it renews while running; an expired lease (a crashed replica) can be taken over.
"""

from __future__ import annotations

import builtins  # the store has a `list` method; its other annotations mean the builtin
import json
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    Float,
    Index,
    Integer,
    String,
    Table,
    Text,
    and_,
    case,
    func,
    insert,
    or_,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from gateway.core.errors import NotFound
from gateway.storage.db import metadata
from policies.pricing import from_pico

batches = Table(
    "batches",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("team_id", String(40), nullable=False),
    Column("key_id", String(40), nullable=False),
    Column("endpoint", String(64), nullable=False),
    Column("input_file_id", String(64), nullable=False),
    Column("completion_window", String(16), nullable=False),
    Column("status", String(16), nullable=False),
    Column("total", Integer, nullable=False, default=0),
    Column("metadata", Text),  # JSON object
    Column("errors", Text),  # JSON list of OpenAI batch errors
    Column("output_file_id", String(64)),
    Column("error_file_id", String(64)),
    Column("created_at", Float, nullable=False),
    Column("expires_at", Float, nullable=False),
    Column("in_progress_at", Float),
    Column("finalizing_at", Float),
    Column("completed_at", Float),
    Column("failed_at", Float),
    Column("expired_at", Float),
    Column("cancelling_at", Float),
    Column("cancelled_at", Float),
    Column("lease_owner", String(40)),
    Column("lease_until", Float),
    Index("ix_batches_team_created", "team_id", "created_at"),
    Index("ix_batches_status", "status"),
)

batch_results = Table(
    "batch_results",
    metadata,
    Column("batch_id", String(64), primary_key=True),
    Column("line", Integer, primary_key=True),  # 0-based line of the input file
    Column("custom_id", String(512), nullable=False),
    Column("request_id", String(64), nullable=False),
    Column("status_code", Integer, nullable=False),
    Column("body", Text, nullable=False),  # the answer's JSON (or OpenAI's error object)
    Column("prompt_tokens", Integer, nullable=False, default=0),
    Column("completion_tokens", Integer, nullable=False, default=0),
    Column("cached_tokens", Integer, nullable=False, default=0),
    Column("cost_pusd", BigInteger, nullable=False, default=0),
    Column("created_at", Float, nullable=False),
)

UNFINISHED = ("validating", "in_progress", "finalizing", "cancelling")
TIMESTAMPS = (
    "in_progress_at",
    "finalizing_at",
    "completed_at",
    "failed_at",
    "expired_at",
    "cancelling_at",
    "cancelled_at",
)


@dataclass(frozen=True, slots=True)
class BatchRecord:
    id: str
    team_id: str
    key_id: str
    endpoint: str
    input_file_id: str
    completion_window: str
    status: str
    total: int
    created_at: float
    expires_at: float
    metadata: dict[str, str] | None = None
    errors: list[dict[str, Any]] | None = None
    output_file_id: str | None = None
    error_file_id: str | None = None
    times: dict[str, float | None] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ResultRow:
    line: int
    custom_id: str
    request_id: str
    status_code: int
    body: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cost_pusd: int = 0

    @property
    def ok(self) -> bool:
        return 200 <= self.status_code < 300


@dataclass(frozen=True, slots=True)
class Progress:
    completed: int
    failed: int
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    cost_usd: Any  # Decimal


def new_batch_id() -> str:
    return "batch_" + secrets.token_hex(12)


class BatchStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def create(
        self,
        *,
        team_id: str,
        key_id: str,
        endpoint: str,
        input_file_id: str,
        completion_window: str,
        window_s: float,
        total: int,
        metadata: dict[str, str] | None,
        errors: list[dict[str, Any]] | None = None,
    ) -> str:
        """A new batch: `in_progress`, or `failed` when its input did not validate."""
        now = time.time()
        batch_id = new_batch_id()
        status, stamp = ("failed", "failed_at") if errors else ("in_progress", "in_progress_at")
        async with self._engine.begin() as conn:
            await conn.execute(
                insert(batches).values(
                    id=batch_id,
                    team_id=team_id,
                    key_id=key_id,
                    endpoint=endpoint,
                    input_file_id=input_file_id,
                    completion_window=completion_window,
                    status=status,
                    total=total,
                    metadata=json.dumps(metadata) if metadata else None,
                    errors=json.dumps(errors) if errors else None,
                    created_at=now,
                    expires_at=now + window_s,
                    **{stamp: now},
                )
            )
        return batch_id

    async def get(self, batch_id: str, team_id: str | None = None) -> BatchRecord:
        query = select(batches).where(batches.c.id == batch_id)
        if team_id is not None:
            query = query.where(batches.c.team_id == team_id)
        async with self._engine.connect() as conn:
            row = (await conn.execute(query)).first()
        if row is None:
            raise NotFound(f"no batch {batch_id!r}", code="batch_not_found", param="batch_id")
        return _record(row)

    async def list(self, team_id: str, *, after: str | None = None, limit: int = 20) -> tuple[list[BatchRecord], bool]:
        query = select(batches).where(batches.c.team_id == team_id)
        async with self._engine.connect() as conn:
            if after:
                cursor = (
                    await conn.execute(
                        select(batches.c.created_at, batches.c.id).where(
                            batches.c.id == after, batches.c.team_id == team_id
                        )
                    )
                ).first()
                if cursor is not None:
                    query = query.where(
                        or_(
                            batches.c.created_at < cursor.created_at,
                            and_(batches.c.created_at == cursor.created_at, batches.c.id < cursor.id),
                        )
                    )
            rows = (
                await conn.execute(query.order_by(batches.c.created_at.desc(), batches.c.id.desc()).limit(limit + 1))
            ).all()
        return [_record(r) for r in rows[:limit]], len(rows) > limit

    async def uses_file(self, file_id: str) -> bool:
        """Whether an unfinished batch reads this file (it may not be deleted then)."""
        async with self._engine.connect() as conn:
            row = (
                await conn.execute(
                    select(batches.c.id)
                    .where(batches.c.input_file_id == file_id, batches.c.status.in_(UNFINISHED))
                    .limit(1)
                )
            ).first()
        return row is not None

    async def set_status(
        self, batch_id: str, status: str, *, only_from: tuple[str, ...] | None = None, **values: Any
    ) -> bool:
        """Move a batch to `status` (stamping `<status>_at`); with `only_from`, only from those."""
        stamp = f"{status}_at"
        if stamp in TIMESTAMPS:
            values.setdefault(stamp, time.time())
        query = update(batches).where(batches.c.id == batch_id)
        if only_from is not None:
            query = query.where(batches.c.status.in_(only_from))
        async with self._engine.begin() as conn:
            result = await conn.execute(query.values(status=status, **values))
        return result.rowcount > 0

    async def claim(self, owner: str, lease_s: float, exclude: set[str]) -> builtins.list[str]:
        """Take the lease of every unfinished batch nobody holds (or whose holder stopped renewing)."""
        now = time.time()
        async with self._engine.connect() as conn:
            ids = [
                r.id
                for r in await conn.execute(
                    select(batches.c.id).where(
                        batches.c.status.in_(UNFINISHED),
                        or_(
                            batches.c.lease_until.is_(None), batches.c.lease_until < now, batches.c.lease_owner == owner
                        ),
                    )
                )
            ]
        claimed = []
        for batch_id in ids:
            if batch_id not in exclude and await self.renew(batch_id, owner, lease_s, take=True):
                claimed.append(batch_id)
        return claimed

    async def renew(self, batch_id: str, owner: str, lease_s: float, take: bool = False) -> bool:
        now = time.time()
        held = batches.c.lease_owner == owner
        if take:
            held = or_(held, batches.c.lease_until.is_(None), batches.c.lease_until < now)
        async with self._engine.begin() as conn:
            result = await conn.execute(
                update(batches)
                .where(batches.c.id == batch_id, held)
                .values(lease_owner=owner, lease_until=now + lease_s)
            )
        return result.rowcount > 0

    async def release(self, batch_id: str, owner: str) -> None:
        async with self._engine.begin() as conn:
            await conn.execute(
                update(batches)
                .where(batches.c.id == batch_id, batches.c.lease_owner == owner)
                .values(lease_owner=None, lease_until=None)
            )

    # per-line results
    async def add_result(self, batch_id: str, row: ResultRow) -> bool:
        """Record a line's result; False when it was already recorded (then nothing changes)."""
        try:
            async with self._engine.begin() as conn:
                await conn.execute(
                    insert(batch_results).values(
                        batch_id=batch_id,
                        line=row.line,
                        custom_id=row.custom_id,
                        request_id=row.request_id,
                        status_code=row.status_code,
                        body=row.body,
                        prompt_tokens=row.prompt_tokens,
                        completion_tokens=row.completion_tokens,
                        cached_tokens=row.cached_tokens,
                        cost_pusd=row.cost_pusd,
                        created_at=time.time(),
                    )
                )
        except IntegrityError:
            return False
        return True

    async def done_lines(self, batch_id: str) -> set[int]:
        async with self._engine.connect() as conn:
            return {
                r.line
                for r in await conn.execute(select(batch_results.c.line).where(batch_results.c.batch_id == batch_id))
            }

    async def results(self, batch_id: str) -> builtins.list[ResultRow]:
        async with self._engine.connect() as conn:
            rows = await conn.execute(
                select(batch_results).where(batch_results.c.batch_id == batch_id).order_by(batch_results.c.line)
            )
            return [
                ResultRow(
                    r.line,
                    r.custom_id,
                    r.request_id,
                    r.status_code,
                    r.body,
                    r.prompt_tokens,
                    r.completion_tokens,
                    r.cached_tokens,
                    r.cost_pusd,
                )
                for r in rows
            ]

    async def progress(self, batch_id: str) -> Progress:
        ok = and_(batch_results.c.status_code >= 200, batch_results.c.status_code < 300)
        r = batch_results.c
        async with self._engine.connect() as conn:
            row = (
                await conn.execute(
                    select(
                        func.count().label("n"),
                        func.coalesce(func.sum(case((ok, 1), else_=0)), 0).label("ok"),
                        func.coalesce(func.sum(r.prompt_tokens), 0).label("pt"),
                        func.coalesce(func.sum(r.completion_tokens), 0).label("ct"),
                        func.coalesce(func.sum(r.cached_tokens), 0).label("cached"),
                        func.coalesce(func.sum(r.cost_pusd), 0).label("cost"),
                    ).where(r.batch_id == batch_id)
                )
            ).one()
        return Progress(
            int(row.ok), int(row.n) - int(row.ok), int(row.pt), int(row.ct), int(row.cached), from_pico(int(row.cost))
        )


def _record(row) -> BatchRecord:
    return BatchRecord(
        id=row.id,
        team_id=row.team_id,
        key_id=row.key_id,
        endpoint=row.endpoint,
        input_file_id=row.input_file_id,
        completion_window=row.completion_window,
        status=row.status,
        total=row.total,
        created_at=row.created_at,
        expires_at=row.expires_at,
        metadata=json.loads(row.metadata) if row.metadata else None,
        errors=json.loads(row.errors) if row.errors else None,
        output_file_id=row.output_file_id,
        error_file_id=row.error_file_id,
        times={t: getattr(row, t) for t in TIMESTAMPS},
    )
