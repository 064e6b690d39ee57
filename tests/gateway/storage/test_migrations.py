"""Schema migrations (gateway/storage/migrate.py, issue 28 item 7): the revisions build exactly the
tables the code defines, a database the previous release made (b66b511, before migrations) is
upgraded in place with its rows, and replicas starting together on an empty database all come up.

previous_schema/ holds the schema b66b511's start left, dumped from that release: `.schema` of
its SQLite file and `pg_dump --schema-only` of its PostgreSQL database (session settings cut).
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import MetaData, func, select
from sqlalchemy.engine import Connection

import gateway.app  # noqa: F401  (the dashboard's tables join the shared metadata on import)
from gateway.storage import cascade_samples, db, distill_texts
from gateway.storage import verdict_store as feedback
from gateway.storage.db import create_engine, ledger
from gateway.storage.migrate import current_revision, head_revision, upgrade_schema
from tests.gateway.budget_support import fresh_postgres

PREVIOUS = Path(__file__).parent / "previous_schema"
ROOT = Path(__file__).resolve().parents[3]


def code_schema() -> MetaData:
    """Every table the product defines, in one MetaData for Alembic's comparison."""
    combined = MetaData()
    for part in (db.metadata, feedback.metadata, distill_texts.metadata, cascade_samples.metadata):
        for table in part.tables.values():
            table.to_metadata(combined)
    return combined


def differences(conn: Connection) -> list:
    return compare_metadata(MigrationContext.configure(conn), code_schema())


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'costgate.db'}"
    else:
        with fresh_postgres() as pg:
            yield pg


def load_previous_schema(url: str) -> None:
    if url.startswith("sqlite"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
            conn.executescript((PREVIOUS / "b66b511.sqlite.sql").read_text())
        return

    async def run() -> None:
        conn = await asyncpg.connect(url)
        try:
            await conn.execute((PREVIOUS / "b66b511.postgresql.sql").read_text())
        finally:
            await conn.close()

    asyncio.run(run())


async def test_the_revisions_build_exactly_the_tables_the_code_defines(url: str) -> None:
    """A missing revision (a column added in code only) shows up here, with what differs."""
    engine = create_engine(url)
    try:
        await upgrade_schema(engine)
        async with engine.connect() as conn:
            assert await conn.run_sync(differences) == []
        assert await current_revision(engine) == head_revision()
    finally:
        await engine.dispose()


async def test_a_ledger_the_previous_release_made_is_upgraded_in_place(url: str) -> None:
    await asyncio.to_thread(load_previous_schema, url)
    engine = create_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.execute(
                ledger.insert().values(
                    request_id="old-1", created_at=1.0, day="1970-01-01", endpoint="chat", team_id="t1",
                    cost_pusd=123_456_789, latency_ms=5.0, cache_status="miss", status=200,
                )
            )  # fmt: skip
        assert await current_revision(engine) is None  # made before migrations
        await upgrade_schema(engine)
        await upgrade_schema(engine)  # the next start: nothing to do
        assert await current_revision(engine) == head_revision()
        async with engine.connect() as conn:
            assert await conn.run_sync(differences) == []
            rows = (await conn.execute(select(ledger.c.request_id, ledger.c.cost_pusd))).all()
        assert [tuple(r) for r in rows] == [("old-1", 123_456_789)]
    finally:
        await engine.dispose()


async def test_an_older_database_gains_the_sample_columns_and_indexes_it_lacked(tmp_path: Path) -> None:
    """Before b66b511 each start added what was missing; the baseline does the same once."""
    path = tmp_path / "older.db"
    with sqlite3.connect(path) as conn:
        conn.executescript((PREVIOUS / "b66b511.sqlite.sql").read_text())
        conn.executescript(
            "DROP INDEX ix_ledger_live; DROP TABLE cascade_samples;"
            "CREATE TABLE cascade_samples (id INTEGER NOT NULL, cascade VARCHAR(200) NOT NULL, created_at FLOAT"
            " NOT NULL, request_id VARCHAR(40), confidences TEXT NOT NULL, agrees TEXT NOT NULL, PRIMARY KEY (id));"
            "INSERT INTO cascade_samples (cascade, created_at, confidences, agrees) VALUES ('auto', 1, '[]', '[]');"
        )
    engine = create_engine(f"sqlite:///{path}")
    try:
        await upgrade_schema(engine)
        async with engine.connect() as conn:
            assert await conn.run_sync(differences) == []
            kept = await conn.scalar(select(func.count()).select_from(cascade_samples.cascade_samples))
        assert kept == 1
    finally:
        await engine.dispose()


async def test_starts_in_one_process_take_turns(tmp_path: Path) -> None:
    """Three engines on one new SQLite file upgrade at once: the file lock makes them take turns
    without blocking the loop (the holder needs it to finish)."""
    engines = [create_engine(f"sqlite:///{tmp_path / 'race.db'}") for _ in range(3)]
    try:
        await asyncio.wait_for(asyncio.gather(*(upgrade_schema(e) for e in engines)), 60)
        assert {await current_revision(e) for e in engines} == {head_revision()}
    finally:
        for e in engines:
            await e.dispose()


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_two_processes_started_together_on_an_empty_database_both_come_up(backend: str, tmp_path: Path) -> None:
    """`costgate db upgrade` is the schema step of `costgate serve`'s start; two at once, five
    times, each time on an empty database: both exit 0 and the schema is at head."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    for attempt in range(5):
        with fresh_postgres() if backend == "postgresql" else _nothing(tmp_path, attempt) as database_url:
            config = tmp_path / f"c{attempt}.yaml"
            config.write_text(f"database_url: {database_url}\ndata_dir: {tmp_path / f'data{attempt}'}\n")
            command = [sys.executable, "-m", "gateway.cli", "db", "upgrade", "--config", str(config)]
            both = [subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                    for _ in range(2)]  # fmt: skip
            outputs = [p.communicate(timeout=120)[0] for p in both]
            assert [p.returncode for p in both] == [0, 0], outputs
            assert all("(at head)" in out for out in outputs), outputs


class _nothing:
    """A fresh SQLite URL, as a context manager like fresh_postgres."""

    def __init__(self, tmp_path: Path, attempt: int) -> None:
        self.url = f"sqlite:///{tmp_path / f'empty{attempt}.db'}"

    def __enter__(self) -> str:
        return self.url

    def __exit__(self, *_: object) -> None:
        return None


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_two_gateways_started_together_on_an_empty_database_both_serve(backend: str, tmp_path: Path) -> None:
    """The same through `costgate serve` itself (issue 28: on SQLite one of two exited with
    `table ledger already exists`, 1 start in 3): both answer /readyz, three times."""
    from tests.support import free_port, wait_http

    env = {**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    for attempt in range(3):
        with fresh_postgres() if backend == "postgresql" else _nothing(tmp_path, attempt) as database_url:
            procs = []
            for replica in range(2):
                config = tmp_path / f"serve{attempt}-{replica}.yaml"
                data = tmp_path / f"serve-data{attempt}-{replica}"
                config.write_text(f"database_url: {database_url}\ndata_dir: {data}\nadmin_key: k\nmodels: []\n")
                port = free_port()
                command = [sys.executable, "-m", "gateway.cli", "serve", "--config", str(config), "--port", str(port)]
                log = open(tmp_path / f"serve{attempt}-{replica}.log", "wb")
                procs.append((port, subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)))
            try:
                for port, proc in procs:
                    wait_http(f"http://127.0.0.1:{port}/readyz", proc, timeout=120)
            finally:
                for _, proc in procs:
                    proc.terminate()
                    proc.wait(60)
