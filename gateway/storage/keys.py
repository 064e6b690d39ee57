"""Teams and API keys. Keys are shown once and stored only as SHA-256 hashes.

A key carries 256 random bits, so a fast hash is the right one (a slow password hash buys
nothing against a secret that cannot be guessed) and lets every request check in microseconds.
Lookups are cached per process for `cache_ttl_s`: a revocation takes effect at once on the
replica that made it and within that time on the others. When a key's cached check expires,
the requests that find it so together wait for one read of its row (`_load_once`).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import math
import secrets
import time
from dataclasses import dataclass

from sqlalchemy import insert, or_, select, update
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

from gateway.core.context import Principal
from gateway.core.errors import AuthenticationFailed, InvalidRequest, NotFound, Unavailable
from gateway.storage.db import api_keys, teams

KEY_PREFIX = "sk-cg-"
PLANS = ("free", "pro", "enterprise")


def new_secret() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_key(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def new_id(kind: str) -> str:
    return f"{kind}_{secrets.token_hex(8)}"


@dataclass(frozen=True, slots=True)
class Team:
    id: str
    name: str


@dataclass(frozen=True, slots=True)
class KeyRecord:
    id: str
    team_id: str
    name: str | None
    prefix: str
    models: list[str] | None
    plan: str
    tags: list[str]
    expires_at: float | None
    revoked_at: float | None
    created_at: float


@dataclass(slots=True)
class _Cached:
    principal: Principal
    key_hash: str
    expires_at: float | None
    checked_at: float


class KeyStore:
    def __init__(self, engine: AsyncEngine, cache_ttl_s: float = 5.0) -> None:
        self._engine = engine
        self._ttl = cache_ttl_s
        self._cache: dict[str, _Cached] = {}
        self._loading: dict[str, asyncio.Future[_Cached | None]] = {}  # by digest: one load at a time
        self._changes = 0  # keys revoked or rotated by this process: a load begun before one is not cached

    # teams
    async def create_team(self, name: str) -> Team:
        team = Team(new_id("team"), name)
        try:
            async with self._engine.begin() as conn:
                await conn.execute(insert(teams).values(id=team.id, name=name, created_at=time.time()))
        except IntegrityError:
            raise InvalidRequest(f"a team named {name!r} exists", code="team_exists", param="name") from None
        return team

    async def list_teams(self) -> list[Team]:
        async with self._engine.connect() as conn:
            rows = await conn.execute(select(teams.c.id, teams.c.name).order_by(teams.c.created_at))
        return [Team(r.id, r.name) for r in rows]

    async def find_team(self, id_or_name: str) -> Team:
        async with self._engine.connect() as conn:
            row = (
                await conn.execute(
                    select(teams.c.id, teams.c.name).where(or_(teams.c.id == id_or_name, teams.c.name == id_or_name))
                )
            ).first()
        if row is None:
            raise NotFound(f"no team {id_or_name!r}", code="team_not_found")
        return Team(row.id, row.name)

    # keys
    async def create_key(
        self,
        team: str,
        *,
        name: str | None = None,
        models: list[str] | None = None,
        plan: str = "pro",
        tags: list[str] | None = None,
        expires_at: float | None = None,
    ) -> tuple[KeyRecord, str]:
        if plan not in PLANS:
            raise InvalidRequest(f"plan must be one of {', '.join(PLANS)}", param="plan")
        if expires_at is not None and not math.isfinite(expires_at):  # `now >= NaN` is never true
            raise InvalidRequest("expires_at must be a finite time", param="expires_at")
        found = await self.find_team(team)
        secret = new_secret()
        record = KeyRecord(
            new_id("key"), found.id, name, secret[:10], models, plan, tags or [], expires_at, None, time.time()
        )
        async with self._engine.begin() as conn:
            await conn.execute(
                insert(api_keys).values(
                    id=record.id,
                    team_id=record.team_id,
                    name=name,
                    key_hash=hash_key(secret),
                    key_prefix=record.prefix,
                    models=None if models is None else json.dumps(models),
                    plan=plan,
                    tags=json.dumps(record.tags),
                    expires_at=expires_at,
                    created_at=record.created_at,
                )
            )
        return record, secret

    async def list_keys(self, team_id: str | None = None) -> list[KeyRecord]:
        query = select(api_keys).order_by(api_keys.c.created_at)
        if team_id is not None:
            query = query.where(api_keys.c.team_id == team_id)
        async with self._engine.connect() as conn:
            rows = await conn.execute(query)
        return [_record(r) for r in rows]

    async def revoke(self, key_id: str) -> None:
        async with self._engine.begin() as conn:
            result = await conn.execute(
                update(api_keys)
                .where(api_keys.c.id == key_id, api_keys.c.revoked_at.is_(None))
                .values(revoked_at=time.time())
            )
        if result.rowcount == 0:
            raise NotFound(f"no active key {key_id!r}", code="key_not_found")
        self._forget(key_id)

    async def rotate(self, key_id: str) -> str:
        """A new secret for the same key id (budgets and history stay attached); the old one stops."""
        secret = new_secret()
        async with self._engine.begin() as conn:
            result = await conn.execute(
                update(api_keys)
                .where(api_keys.c.id == key_id, api_keys.c.revoked_at.is_(None))
                .values(key_hash=hash_key(secret), key_prefix=secret[:10])
            )
        if result.rowcount == 0:
            raise NotFound(f"no active key {key_id!r}", code="key_not_found")
        self._forget(key_id)
        return secret

    def _forget(self, key_id: str) -> None:
        """After a revocation or rotation: the key's cached check is dropped, and so is any load
        in flight (it may have read the row before the change): requests from now on read anew,
        and what a load begun earlier reads is not cached."""
        for digest in [d for d, c in self._cache.items() if c.principal.key_id == key_id]:
            del self._cache[digest]
        self._loading.clear()
        self._changes += 1

    async def authenticate(self, secret: str | None) -> Principal:
        if not secret or not secret.startswith(KEY_PREFIX):
            raise AuthenticationFailed(
                "missing or malformed API key: send a costgate key as 'Authorization: Bearer sk-cg-…' "
                "(or 'x-api-key: sk-cg-…', as Anthropic's clients do)"
            )
        digest = hash_key(secret)
        now = time.time()
        cached = self._cache.get(digest)
        if cached is None or now - cached.checked_at > self._ttl:
            try:
                cached = await self._load_once(digest, now)
            except SQLAlchemyError:
                # The database is down: a key checked before keeps working from memory
                # (a revocation waits for the database); an unknown key cannot be checked.
                if cached is None:
                    raise Unavailable(
                        "API keys cannot be checked right now; try again shortly",
                        code="key_store_unavailable",
                        retry_after=1,
                    ) from None
        # The dict lookup already matched; compare again in constant time so that no code path
        # decides on a secret-derived value with an early-exit comparison.
        if cached is None or not hmac.compare_digest(cached.key_hash, digest):
            raise AuthenticationFailed("invalid API key")
        if cached.expires_at is not None and now >= cached.expires_at:
            raise AuthenticationFailed("API key expired", code="expired_api_key")
        return cached.principal

    async def principal_for_id(self, key_id: str) -> Principal:
        """The principal of a key by its id, checked now (revoked or expired: refused). For work
        a key submitted earlier and the gateway runs later (a batch's lines): the secret is
        never stored, so the key is found by id, and a revocation stops the rest of the work."""
        async with self._engine.connect() as conn:
            row = (
                await conn.execute(
                    select(api_keys, teams.c.name.label("team_name"))
                    .join(teams, teams.c.id == api_keys.c.team_id)
                    .where(api_keys.c.id == key_id, api_keys.c.revoked_at.is_(None))
                )
            ).first()
        if row is None:
            raise AuthenticationFailed("the API key that submitted this work was revoked")
        if row.expires_at is not None and time.time() >= row.expires_at:
            raise AuthenticationFailed("the API key that submitted this work expired", code="expired_api_key")
        return _principal(row)

    async def _load_once(self, digest: str, now: float) -> _Cached | None:
        """The key's row, read by one query however many requests ask at once: when a key's
        cached check expires, every request in flight with it finds it expired together (32 at once
        made 32 identical queries, queued on the database behind each other:
        tests/gateway/storage/test_keys_cache.py); they all wait for the first one's query. A waiter
        that is cancelled does not cancel the query the others wait for."""
        loading = self._loading.get(digest)
        if loading is None:
            loading = self._loading[digest] = asyncio.ensure_future(self._load(digest, now))
            loading.add_done_callback(lambda done: self._loaded(digest, done))
        return await asyncio.shield(loading)

    def _loaded(self, digest: str, done: asyncio.Future[_Cached | None]) -> None:
        if self._loading.get(digest) is done:
            del self._loading[digest]
        if not done.cancelled():
            done.exception()  # retrieved here too: every waiter may have been cancelled

    async def _load(self, digest: str, now: float) -> _Cached | None:
        changes = self._changes
        async with self._engine.connect() as conn:
            row = (
                await conn.execute(
                    select(api_keys, teams.c.name.label("team_name"))
                    .join(teams, teams.c.id == api_keys.c.team_id)
                    .where(api_keys.c.key_hash == digest, api_keys.c.revoked_at.is_(None))
                )
            ).first()
        if row is None:
            self._cache.pop(digest, None)
            return None
        cached = _Cached(_principal(row), digest, row.expires_at, now)
        if changes == self._changes:
            self._cache[digest] = cached
        return cached


def _principal(row) -> Principal:
    models = json.loads(row.models) if row.models else None
    return Principal(
        team_id=row.team_id,
        team_name=row.team_name,
        key_id=row.id,
        plan=row.plan,
        allowed_models=None if models is None else frozenset(models),
        tags=tuple(json.loads(row.tags or "[]")),
    )


def _record(row) -> KeyRecord:
    return KeyRecord(
        row.id,
        row.team_id,
        row.name,
        row.key_prefix,
        json.loads(row.models) if row.models else None,
        row.plan,
        json.loads(row.tags or "[]"),
        row.expires_at,
        row.revoked_at,
        row.created_at,
    )
