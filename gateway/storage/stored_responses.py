"""Stored responses of the Responses API, per team, in the gateway's database.

A response created with `store` (the default) is kept for `previous_response_id` and for GET
and DELETE /v1/responses/{id} (gateway/apis/responses/response_chain.py says who may see one: only its
team). Each row keeps the request's own input items, the output items and the Response as
served, as one JSON text. Rows live `ttl_s`; an expired row reads as absent and is deleted by
the next write. A team's rows together stay under `max_team_bytes`: a write that passes it
deletes that team's oldest rows first, so one team's traffic never evicts another's.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import orjson
from sqlalchemy import Column, Float, Index, Integer, String, Table, Text, delete, func, insert, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from gateway.apis.responses.response_chain import StoredResponse
from gateway.config.settings import ResponsesConfig
from gateway.storage.db import metadata

stored_responses = Table(
    "stored_responses",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("team_id", String(40), nullable=False),
    Column("previous_response_id", String(64)),
    Column("created_at", Float, nullable=False),
    Column("expires_at", Float, nullable=False),
    Column("bytes", Integer, nullable=False),
    Column("data", Text, nullable=False),  # JSON: input_items, output_items, response
    Index("ix_stored_responses_team_created", "team_id", "created_at"),
    Index("ix_stored_responses_expires", "expires_at"),
)


class ResponseStore:
    def __init__(self, engine: AsyncEngine, config: ResponsesConfig, clock: Callable[[], float] = time.time) -> None:
        self._engine = engine
        self.config = config
        self.clock = clock

    async def put(self, stored: StoredResponse) -> None:
        data = orjson.dumps(
            {"input_items": stored.input_items, "output_items": stored.output_items, "response": stored.response}
        ).decode()
        now = self.clock()
        async with self._engine.begin() as conn:
            await conn.execute(delete(stored_responses).where(stored_responses.c.expires_at <= now))
            await conn.execute(
                insert(stored_responses).values(
                    id=stored.id,
                    team_id=stored.team_id,
                    previous_response_id=stored.previous_response_id,
                    created_at=now,
                    expires_at=now + self.config.ttl_s,
                    bytes=len(data),
                    data=data,
                )
            )
            await self._cap(conn, stored.team_id)

    async def _cap(self, conn: AsyncConnection, team_id: str) -> None:
        """Delete the team's oldest rows until its rows fit `max_team_bytes` (the newest stays)."""
        team = stored_responses.c.team_id == team_id
        total = (await conn.execute(select(func.sum(stored_responses.c.bytes)).where(team))).scalar() or 0
        if total <= self.config.max_team_bytes:
            return
        rows = await conn.execute(
            select(stored_responses.c.id, stored_responses.c.bytes).where(team).order_by(stored_responses.c.created_at)
        )
        doomed = []
        for row in rows.all()[:-1]:
            if total <= self.config.max_team_bytes:
                break
            doomed.append(row.id)
            total -= row.bytes
        await conn.execute(delete(stored_responses).where(stored_responses.c.id.in_(doomed)))

    async def get(self, response_id: str) -> StoredResponse | None:
        query = select(stored_responses).where(
            stored_responses.c.id == response_id, stored_responses.c.expires_at > self.clock()
        )
        async with self._engine.connect() as conn:
            row = (await conn.execute(query)).first()
        if row is None:
            return None
        data = orjson.loads(row.data)
        return StoredResponse(
            row.id,
            row.team_id,
            row.previous_response_id,
            tuple(data["input_items"]),
            tuple(data["output_items"]),
            data["response"],
        )

    async def delete(self, response_id: str) -> None:
        async with self._engine.begin() as conn:
            await conn.execute(delete(stored_responses).where(stored_responses.c.id == response_id))
