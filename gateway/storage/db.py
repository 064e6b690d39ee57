"""Tables and the async engine. SQLite (WAL) by default, PostgreSQL by URL.

Money is stored as integer pico-dollars (1e-12 $): exact on every backend (SQLite has no
exact decimal type), fine enough for per-token prices, and summed exactly by SQL.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import BigInteger, Column, Float, Index, Integer, MetaData, String, Table, Text, event
from sqlalchemy.engine import Dialect, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from gateway.storage.migrate import upgrade_schema
from gateway.storage.private import private_file

metadata = MetaData()

teams = Table(
    "teams",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("name", String(200), nullable=False, unique=True),
    Column("created_at", Float, nullable=False),
)

api_keys = Table(
    "api_keys",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("team_id", String(40), nullable=False, index=True),
    Column("name", String(200)),
    Column("key_hash", String(64), nullable=False, unique=True),
    Column("key_prefix", String(16), nullable=False),
    Column("models", Text),  # JSON list, NULL for every model
    Column("plan", String(20), nullable=False),
    Column("tags", Text),  # JSON list
    Column("expires_at", Float),
    Column("revoked_at", Float),
    Column("created_at", Float, nullable=False),
)

ledger = Table(
    "ledger",
    metadata,
    Column("request_id", String(40), primary_key=True),
    Column("created_at", Float, nullable=False),
    Column("day", String(10), nullable=False),  # utc_day(created_at)
    Column("team_id", String(40)),
    Column("key_id", String(40)),
    Column("user", String(200)),
    Column("tags", Text),  # comma-separated, each tag also wrapped: ",a,b," so LIKE ',a,' finds one
    Column("trace_id", String(200)),
    Column("endpoint", String(32), nullable=False),
    Column("requested_model", String(200)),
    Column("served_model", String(200)),
    Column("provider", String(32)),
    Column("prompt_tokens", Integer, nullable=False, default=0),
    Column("completion_tokens", Integer, nullable=False, default=0),
    Column("cached_tokens", Integer, nullable=False, default=0),
    Column("cost_pusd", BigInteger, nullable=False, default=0),
    Column("saved_pusd", BigInteger, nullable=False, default=0),
    # Issue 26: every token at its own price. Writes to the provider's prompt cache (reads are
    # cached_tokens), the tier the provider billed at, and what its cache and tiers saved.
    Column("cache_write_tokens", Integer, nullable=False, server_default="0"),
    Column("cache_write_1h_tokens", Integer, nullable=False, server_default="0"),
    Column("tier", String(16), nullable=False, server_default="standard"),
    Column("provider_cache_saved_pusd", BigInteger, nullable=False, server_default="0"),
    Column("provider_tier_saved_pusd", BigInteger, nullable=False, server_default="0"),
    # JSON {deployment: cost_pusd} when the cost is not all the served model's (a cascade's
    # tiers, a judge, a failed call that was billed): what reconciliation splits by provider
    Column("cost_split", Text),
    Column("latency_ms", Float, nullable=False),
    Column("ttft_ms", Float),
    Column("cache_status", String(16), nullable=False),
    Column("status", Integer, nullable=False),
    Column("error", Text),
    Index("ix_ledger_team_day", "team_id", "day"),
    Index("ix_ledger_day", "day"),
    Index("ix_ledger_trace", "trace_id"),
    Index("ix_ledger_created", "created_at"),
)


def utc_day(ts: float) -> str:
    """A ledger row's `day`: its created_at's UTC date, YYYY-MM-DD."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d")


def async_url(url: str) -> str:
    """`sqlite:///x.db` and `postgresql://…` as the async drivers' URLs."""
    parsed = make_url(url)
    driver = {"sqlite": "sqlite+aiosqlite", "postgresql": "postgresql+asyncpg", "postgres": "postgresql+asyncpg"}.get(
        parsed.drivername, parsed.drivername
    )
    return parsed.set(drivername=driver).render_as_string(hide_password=False)


def create_engine(url: str) -> AsyncEngine:
    target = make_url(async_url(url))
    if target.drivername.startswith("sqlite"):
        if target.database and target.database != ":memory:":
            Path(target.database).parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            private_file(target.database)  # SQLite gives its -wal and -shm files the same mode
        engine = create_async_engine(target)

        @event.listens_for(engine.sync_engine, "connect")
        def _pragmas(dbapi_conn, _record):
            cursor = dbapi_conn.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA busy_timeout=5000")
            cursor.close()

        return engine
    engine = create_async_engine(target, pool_size=10, max_overflow=10, pool_pre_ping=True)
    event.listen(engine.sync_engine, "do_connect", _connect_or_operational_error)
    return engine


def _connect_or_operational_error(dialect: Dialect, _record: object, cargs: tuple, cparams: dict) -> object:
    """asyncpg raises a bare OSError (connection refused) or TimeoutError when PostgreSQL is
    down, which SQLAlchemy passes through unwrapped. As the driver's OperationalError it
    becomes SQLAlchemy's, so every caller that handles SQLAlchemyError (the ledger writer's
    retry, the key store) handles an outage too."""
    try:
        return dialect.connect(*cargs, **cparams)
    except (OSError, TimeoutError) as err:
        raise dialect.loaded_dbapi.OperationalError(f"cannot connect to the database: {err!r}") from err


async def create_tables(engine: AsyncEngine) -> None:
    """The schema at its newest revision: Alembic's, under a lock (gateway/storage/migrate.py)."""
    await upgrade_schema(engine)
