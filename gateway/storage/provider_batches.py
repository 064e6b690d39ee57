"""The batches costgate submitted to a provider's own Batch API (issue 26), so a gateway that
restarts while the provider works goes on polling them instead of submitting their lines again.

Invariant: a caller's line (batch_id, custom_id) is in at most one unfinished provider batch;
a provider batch's row is written right after the provider accepted it, before any poll.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from sqlalchemy import Column, Float, Index, String, Table, Text, insert, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from gateway.storage.db import metadata

provider_batches = Table(
    "provider_batches",
    metadata,
    Column("id", String(128), primary_key=True),  # the provider's batch id
    Column("batch_id", String(64), nullable=False),  # the caller's batch
    Column("model", String(200), nullable=False),  # the deployment (config name) it was sent to
    Column("status", String(16), nullable=False),  # "submitted" until the caller's batch ended, then "done"
    Column("custom_ids", Text, nullable=False),  # JSON list: the caller's lines it carries
    Column("created_at", Float, nullable=False),
    Index("ix_provider_batches_batch", "batch_id", "model"),
)


@dataclass(frozen=True, slots=True)
class ProviderBatchRecord:
    id: str
    batch_id: str
    model: str
    custom_ids: tuple[str, ...]


class ProviderBatchStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def add(self, record: ProviderBatchRecord) -> None:
        async with self._engine.begin() as conn:
            await conn.execute(
                insert(provider_batches).values(
                    id=record.id,
                    batch_id=record.batch_id,
                    model=record.model,
                    status="submitted",
                    custom_ids=json.dumps(record.custom_ids),
                    created_at=time.time(),
                )
            )

    async def unfinished(self, batch_id: str, model: str) -> list[ProviderBatchRecord]:
        t = provider_batches.c
        query = select(provider_batches).where(t.batch_id == batch_id, t.model == model, t.status == "submitted")
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [ProviderBatchRecord(r.id, r.batch_id, r.model, tuple(json.loads(r.custom_ids))) for r in rows]

    async def done(self, batch_id: str) -> None:
        """The caller's batch ended with every line's result stored: its provider batches are not
        polled again. (Not earlier: a gateway that dies after reading a provider batch's results
        but before storing its lines' reads them again at the next start.)"""
        async with self._engine.begin() as conn:
            await conn.execute(
                update(provider_batches).where(provider_batches.c.batch_id == batch_id).values(status="done")
            )
