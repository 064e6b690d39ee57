"""The schema, brought to the newest revision (gateway/storage/migrations/) at every start and by
`costgate db upgrade`.

Replicas starting together take turns: on PostgreSQL an advisory lock held by the migration's
transaction, on SQLite an exclusive lock on a file beside the database (`<db>.lock`). The one
that comes second finds the schema at head and does nothing.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

SCHEMA_LOCK = 0x636F737467617465  # "costgate": the PostgreSQL advisory lock that serialises schema changes
MIGRATIONS = "gateway.storage:migrations"  # shipped inside the package: no alembic.ini to find

log = logging.getLogger("costgate.storage")


def alembic_config(conn: Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", MIGRATIONS)
    config.attributes["connection"] = conn
    return config


def head_revision() -> str | None:
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


async def upgrade_schema(engine: AsyncEngine) -> None:
    """Every revision the database lacks, under the schema lock."""
    async with _file_lock(engine), engine.begin() as conn:
        if conn.dialect.name == "postgresql":  # released when the transaction ends
            await conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": SCHEMA_LOCK})
        before, after = await conn.run_sync(_upgrade)
    if before != after:
        log.info("database schema upgraded from revision %s to %s", before or "none", after)


def _upgrade(conn: Connection) -> tuple[str | None, str | None]:
    def revision() -> str | None:
        return MigrationContext.configure(conn).get_current_revision()

    before = revision()
    command.upgrade(alembic_config(conn), "head")
    return before, revision()


async def current_revision(engine: AsyncEngine) -> str | None:
    """The revision the database is at; None for an empty one or one made before migrations."""
    async with engine.connect() as conn:
        return await conn.run_sync(lambda sync: MigrationContext.configure(sync).get_current_revision())


@asynccontextmanager
async def _file_lock(engine: AsyncEngine) -> AsyncIterator[None]:
    """An exclusive flock on `<database>.lock` for a SQLite file; nothing for other databases.
    SQLite runs DDL outside a transaction, so the database's own locks cannot serialise two
    processes creating the same tables. The lock is waited for on a thread: a second task of this
    process waits without blocking the loop the first one needs to finish."""
    database = engine.url.database
    if engine.dialect.name != "sqlite" or not database or database == ":memory:":
        yield
        return
    fd = os.open(f"{Path(database)}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        await asyncio.to_thread(fcntl.flock, fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
