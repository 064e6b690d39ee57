"""Dashboard sessions (gateway/dashboard/sessions.py) on a real SQLite database: an id the
browser holds and the database only as a hash, found until it expires or is ended, and a CSRF
token bound to the session."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from gateway.dashboard.sessions import SessionStore, csrf_token, csrf_valid, dashboard_sessions
from gateway.storage.db import create_engine, create_tables


@pytest.fixture
async def db(tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(f"sqlite:///{tmp_path / 'sessions.db'}")
    await create_tables(engine)
    yield engine
    await engine.dispose()


async def stored(engine: AsyncEngine) -> list[str]:
    async with engine.connect() as conn:
        return [r.id_hash for r in await conn.execute(select(dashboard_sessions.c.id_hash))]


async def test_a_new_session_is_found_by_its_id_and_stored_only_as_a_hash(db: AsyncEngine) -> None:
    store = SessionStore(db)
    session = await store.create()
    assert len(session.id) >= 43  # 256 random bits, base64url
    found = await store.find(session.id)
    assert found is not None and found.id == session.id and found.expires_at == session.expires_at
    assert await stored(db) == [hashlib.sha256(session.id.encode()).hexdigest()]  # never the id itself
    assert await store.find(session.id[:-1] + ("A" if session.id[-1] != "A" else "B")) is None


@pytest.mark.parametrize("session_id", [None, "", "x" * 101])
async def test_missing_or_oversized_ids_are_not_looked_up(db: AsyncEngine, session_id: str | None) -> None:
    assert await SessionStore(db).find(session_id) is None


async def test_an_ended_session_is_gone(db: AsyncEngine) -> None:
    store = SessionStore(db)
    ending, staying = await store.create(), await store.create()
    await store.end(ending.id)
    assert await store.find(ending.id) is None
    assert await store.find(staying.id) is not None


async def test_an_expired_session_is_not_found_and_is_swept_by_the_next_sign_in(db: AsyncEngine) -> None:
    expired = await SessionStore(db, lifetime_s=-1).create()
    assert await SessionStore(db).find(expired.id) is None
    fresh = await SessionStore(db).create()  # sweeps what has expired
    async with db.connect() as conn:
        assert (await conn.execute(select(func.count()).select_from(dashboard_sessions))).scalar() == 1
    assert await SessionStore(db).find(fresh.id) is not None


def test_the_csrf_token_is_bound_to_its_session() -> None:
    token = csrf_token("session-one")
    assert token == csrf_token("session-one") and len(token) == 64
    assert csrf_valid("session-one", token)
    assert not csrf_valid("session-two", token)  # another session's token
    assert not csrf_valid("session-one", None) and not csrf_valid("session-one", "")
    assert not csrf_valid("session-one", token[:-1])
