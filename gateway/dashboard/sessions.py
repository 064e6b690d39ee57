"""Dashboard sign-in sessions, held server-side in the database.

The browser holds only a random session id (256 bits) in an HttpOnly, SameSite=Strict cookie;
the database holds its SHA-256, so a leaked table does not leak usable cookies, and every
replica sees the same sessions (sign-out ends one everywhere). The CSRF token of a session is
an HMAC of its id: a page can embed it in forms, a script in another origin cannot read it
(it never sees the cookie), and nothing more needs storing.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass

from sqlalchemy import Column, Float, String, Table, delete, insert, select
from sqlalchemy.ext.asyncio import AsyncEngine

from gateway.storage.db import metadata

COOKIE = "costgate_session"
COOKIE_PATH = "/admin/ui"
LIFETIME_S = 12 * 3600

dashboard_sessions = Table(
    "dashboard_sessions",
    metadata,
    Column("id_hash", String(64), primary_key=True),
    Column("created_at", Float, nullable=False),
    Column("expires_at", Float, nullable=False, index=True),
)


def _digest(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


def csrf_token(session_id: str) -> str:
    return hmac.new(session_id.encode(), b"costgate-dashboard-csrf", hashlib.sha256).hexdigest()


def csrf_valid(session_id: str, token: str | None) -> bool:
    return bool(token) and hmac.compare_digest(csrf_token(session_id).encode(), (token or "").encode())


@dataclass(frozen=True, slots=True)
class Session:
    id: str
    expires_at: float

    @property
    def csrf(self) -> str:
        return csrf_token(self.id)


class SessionStore:
    def __init__(self, engine: AsyncEngine, lifetime_s: float = LIFETIME_S) -> None:
        self._engine = engine
        self._lifetime = lifetime_s

    async def create(self) -> Session:
        session = Session(secrets.token_urlsafe(32), time.time() + self._lifetime)
        async with self._engine.begin() as conn:
            await conn.execute(delete(dashboard_sessions).where(dashboard_sessions.c.expires_at < time.time()))
            await conn.execute(
                insert(dashboard_sessions).values(
                    id_hash=_digest(session.id), created_at=time.time(), expires_at=session.expires_at
                )
            )
        return session

    async def find(self, session_id: str | None) -> Session | None:
        if not session_id or len(session_id) > 100:
            return None
        async with self._engine.connect() as conn:
            row = (
                await conn.execute(
                    select(dashboard_sessions.c.expires_at).where(dashboard_sessions.c.id_hash == _digest(session_id))
                )
            ).first()
        if row is None or row.expires_at <= time.time():
            return None
        return Session(session_id, row.expires_at)

    async def end(self, session_id: str) -> None:
        async with self._engine.begin() as conn:
            await conn.execute(delete(dashboard_sessions).where(dashboard_sessions.c.id_hash == _digest(session_id)))
