"""The batches costgate submitted to a provider's own Batch API (issue 26), so a gateway that
restarts while the provider works goes on polling them instead of submitting their lines again.

Invariant: a caller's line (batch_id, custom_id) is in at most one unfinished provider batch.
A provider batch's row is written before the provider is asked to create it, as `submitting`
under a token of the gateway's own (its id `submitting:<token>`, the token also sent as the
batch's metadata); once the provider accepted it the row takes the provider's id and is
`submitted`, before any poll. A gateway that stops between the two finds the batch at the next
start by that metadata (gateway/providers/batch_api.py), so a kill in that window neither
submits the lines twice nor loses what the provider bills.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from sqlalchemy import Column, Float, Index, String, Table, Text, delete, insert, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from gateway.storage.db import metadata

provider_batches = Table(
    "provider_batches",
    metadata,
    Column("id", String(128), primary_key=True),  # the provider's batch id
    Column("batch_id", String(64), nullable=False),  # the caller's batch
    Column("model", String(200), nullable=False),  # the deployment (config name) it was sent to
    # "submitting" until the provider accepted it, "submitted" until the caller's batch ended, then "done"
    Column("status", String(16), nullable=False),
    Column("custom_ids", Text, nullable=False),  # JSON list: the caller's lines it carries
    Column("created_at", Float, nullable=False),
    Index("ix_provider_batches_batch", "batch_id", "model"),
)


SUBMITTING = "submitting:"  # the id of a row whose provider batch may not exist yet, before its token


@dataclass(frozen=True, slots=True)
class ProviderBatchRecord:
    id: str  # the provider's batch id, or SUBMITTING + token while the provider has not answered
    batch_id: str
    model: str
    custom_ids: tuple[str, ...]
    created_at: float

    @property
    def token(self) -> str | None:
        """The gateway's token for a batch it may or may not have created at the provider."""
        return self.id.removeprefix(SUBMITTING) if self.id.startswith(SUBMITTING) else None


class ProviderBatchStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine

    async def intend(self, token: str, batch_id: str, model: str, custom_ids: tuple[str, ...]) -> ProviderBatchRecord:
        """Written before the provider is asked to create the batch carrying `custom_ids`."""
        record = ProviderBatchRecord(SUBMITTING + token, batch_id, model, custom_ids, time.time())
        async with self._engine.begin() as conn:
            await conn.execute(
                insert(provider_batches).values(
                    id=record.id,
                    batch_id=batch_id,
                    model=model,
                    status="submitting",
                    custom_ids=json.dumps(custom_ids),
                    created_at=record.created_at,
                )
            )
        return record

    async def submitted(self, token: str, provider_id: str) -> None:
        """The provider accepted the batch `token` names, as `provider_id`."""
        async with self._engine.begin() as conn:
            await conn.execute(
                update(provider_batches)
                .where(provider_batches.c.id == SUBMITTING + token)
                .values(id=provider_id, status="submitted")
            )

    async def forget(self, token: str) -> None:
        """The provider never created the batch `token` names: its lines are not at the provider."""
        async with self._engine.begin() as conn:
            await conn.execute(delete(provider_batches).where(provider_batches.c.id == SUBMITTING + token))

    async def unfinished(self, batch_id: str, model: str) -> list[ProviderBatchRecord]:
        t = provider_batches.c
        query = select(provider_batches).where(
            t.batch_id == batch_id, t.model == model, t.status.in_(("submitting", "submitted"))
        )
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [
            ProviderBatchRecord(r.id, r.batch_id, r.model, tuple(json.loads(r.custom_ids)), r.created_at) for r in rows
        ]

    async def done(self, batch_id: str) -> None:
        """The caller's batch ended with every line's result stored: its provider batches are not
        polled again. (Not earlier: a gateway that dies after reading a provider batch's results
        but before storing its lines' reads them again at the next start.)"""
        async with self._engine.begin() as conn:
            await conn.execute(
                update(provider_batches).where(provider_batches.c.batch_id == batch_id).values(status="done")
            )
