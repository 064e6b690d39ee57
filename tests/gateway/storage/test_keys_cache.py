"""The key store's cached checks against a real SQLite database, its queries counted where
SQLAlchemy sends them: requests that find a key's check expired together read its row once,
and a revocation is not undone by a read that began before it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import event

from gateway.core.errors import AuthenticationFailed
from gateway.storage.db import create_engine, create_tables
from gateway.storage.keys import KeyStore


@contextlib.asynccontextmanager
async def database(tmp_path: Path) -> AsyncIterator[tuple[object, list[str]]]:
    engine = create_engine(f"sqlite:///{tmp_path}/keys.db")
    await create_tables(engine)
    selects: list[str] = []

    def count(conn, cursor, statement, parameters, context, executemany) -> None:
        if statement.lstrip().upper().startswith("SELECT") and "api_keys" in statement:
            selects.append(statement)

    event.listen(engine.sync_engine, "before_cursor_execute", count)
    try:
        yield engine, selects
    finally:
        await engine.dispose()


async def test_requests_that_find_a_check_expired_together_read_the_key_once(tmp_path: Path) -> None:
    async with database(tmp_path) as (engine, selects):
        store = KeyStore(engine, cache_ttl_s=0.0)  # every check expired: each request would read
        await store.create_team("t")
        record, secret = await store.create_key("t")
        principals = await asyncio.gather(*(store.authenticate(secret) for _ in range(32)))
        assert {p.key_id for p in principals} == {record.id}
        assert len(selects) == 1
        await store.authenticate(secret)  # later, expired again: read again, not served from the first read
        assert len(selects) == 2


async def test_a_cancelled_request_does_not_cancel_the_read_others_wait_for(tmp_path: Path) -> None:
    async with database(tmp_path) as (engine, selects):
        store = KeyStore(engine, cache_ttl_s=0.0)
        await store.create_team("t")
        record, secret = await store.create_key("t")
        first = asyncio.ensure_future(store.authenticate(secret))
        second = asyncio.ensure_future(store.authenticate(secret))
        await asyncio.sleep(0)  # both are waiting on the one read
        first.cancel()
        assert (await second).key_id == record.id
        with pytest.raises(asyncio.CancelledError):
            await first
        assert len(selects) == 1


class _HeldReads:
    """An engine whose reads, once `holding`, wait for `release` after they have their rows
    before they return: a read that sees the key before a revocation and finishes after it.
    Writes go through."""

    def __init__(self, engine) -> None:
        self.engine, self.release, self.holding = engine, asyncio.Event(), False

    def begin(self):
        return self.engine.begin()

    @contextlib.asynccontextmanager
    async def connect(self) -> AsyncIterator[_HeldReads]:
        yield self

    async def execute(self, statement):
        async with self.engine.connect() as conn:
            rows = (await conn.execute(statement)).all()
        if self.holding:
            await self.release.wait()
        return _Rows(rows)


class _Rows:
    def __init__(self, rows: list) -> None:
        self.rows = rows

    def first(self):
        return self.rows[0] if self.rows else None


async def test_a_read_begun_before_a_revocation_is_not_cached_after_it(tmp_path: Path) -> None:
    async with database(tmp_path) as (engine, _):
        held = _HeldReads(engine)
        store = KeyStore(held, cache_ttl_s=3600.0)  # type: ignore[arg-type]
        await store.create_team("t")
        record, secret = await store.create_key("t")
        held.holding = True
        in_flight = asyncio.ensure_future(store.authenticate(secret))
        for _ in range(20):  # until its read has the (not yet revoked) row and waits
            await asyncio.sleep(0.01)
        await store.revoke(record.id)
        held.release.set()
        assert (await in_flight).key_id == record.id  # it began before the revocation
        with pytest.raises(AuthenticationFailed):
            await store.authenticate(secret)  # not from a cache that read predates the revocation
