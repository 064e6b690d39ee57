"""The ledger: one row per request with every field, exact to the 1e-9 dollar, on SQLite and
PostgreSQL, and /admin/spend answering from it."""

from __future__ import annotations

import asyncio
import secrets
import sqlite3
import time
from collections.abc import Iterator
from decimal import Decimal

import asyncpg
import httpx
import pytest

from tests.conftest import standard_models
from tests.support import GatewayProcess

pytestmark = pytest.mark.slow  # boots processes: not in the fast lane

PG = "postgresql://postgres@127.0.0.1:5432"


def run_traffic(gateway: GatewayProcess, key: str) -> Decimal:
    """A mix of plain and streamed calls; returns the sum of the costs the client was told."""
    client = gateway.client(key)
    total = Decimal(0)
    for i in range(5):
        raw = client.chat.completions.with_raw_response.create(
            model="small" if i % 2 else "large",
            user="alice",
            messages=[{"role": "user", "content": f"question number {i} " * (i + 1)}],
            extra_headers={"x-costgate-tags": "search,beta", "x-costgate-trace-id": "trace-1"},
        )
        total += Decimal(raw.headers["x-costgate-cost-usd"])
    for i in range(3):
        chunks = list(
            client.chat.completions.create(
                model="small",
                stream=True,
                stream_options={"include_usage": True},
                messages=[{"role": "user", "content": f"stream {i} please"}],
            )
        )
        total += Decimal(chunks[-1].usage.model_extra["cost_usd"])
    return total


def test_spend_equals_what_clients_were_charged(gateway: GatewayProcess) -> None:
    key = gateway.new_key("team-ledger")
    charged = run_traffic(gateway, key)
    rows = {r["group"]: r for r in gateway.spend("team")["rows"]}
    team_id = next(t["id"] for t in gateway.admin("GET", "/admin/teams").json()["data"] if t["name"] == "team-ledger")
    assert Decimal(rows[team_id]["cost_usd"]) == charged
    assert rows[team_id]["requests"] == 8
    tags = {r["group"]: r for r in gateway.spend("tag")["rows"]}
    assert tags["search"]["requests"] >= 5 and tags["beta"]["cost_usd"] == tags["search"]["cost_usd"]


def test_ledger_row_has_every_field(gateway: GatewayProcess) -> None:
    key = gateway.new_key("team-fields")
    raw = gateway.client(key).chat.completions.with_raw_response.create(
        model="broken",
        user="bob",
        messages=[{"role": "user", "content": "fields please"}],
        extra_headers={"x-costgate-tags": "t1", "x-costgate-trace-id": "tr-9"},
    )
    request_id = raw.headers["x-costgate-request-id"]
    gateway.spend()  # flushes the ledger
    db = sqlite3.connect(gateway.workdir / "costgate.db")
    db.row_factory = sqlite3.Row
    row = db.execute("SELECT * FROM ledger WHERE request_id = ?", (request_id,)).fetchone()
    usage = raw.parse().usage
    assert row["user"] == "bob" and row["tags"] == ",t1," and row["trace_id"] == "tr-9"
    assert row["requested_model"] == "broken" and row["served_model"] == "small" and row["provider"] == "openai"
    assert (row["prompt_tokens"], row["completion_tokens"]) == (usage.prompt_tokens, usage.completion_tokens)
    assert Decimal(row["cost_pusd"]) / 10**12 == Decimal(raw.headers["x-costgate-cost-usd"])
    assert row["status"] == 200 and row["cache_status"] == "miss" and row["latency_ms"] > 0
    assert row["key_id"].startswith("key_") and row["team_id"].startswith("team_")


def test_streamed_request_records_time_to_first_token(gateway: GatewayProcess, key: str) -> None:
    raw = gateway.client(key).chat.completions.with_raw_response.create(
        model="small", stream=True, messages=[{"role": "user", "content": "ttft"}]
    )
    request_id = raw.headers["x-costgate-request-id"]
    list(raw.parse())
    gateway.spend()
    db = sqlite3.connect(gateway.workdir / "costgate.db")
    ttft, latency, cost = db.execute(
        "SELECT ttft_ms, latency_ms, cost_pusd FROM ledger WHERE request_id = ?", (request_id,)
    ).fetchone()
    assert 0 < ttft <= latency and cost > 0


def test_shutdown_flushes_every_row(tmp_path, fake_upstream) -> None:
    gw = GatewayProcess({"models": standard_models(fake_upstream.url), "ledger_flush_interval_s": 30}, tmp_path / "gw")
    key = gw.new_key("team-flush")
    for _ in range(4):
        gw.client(key).chat.completions.create(model="small", messages=[{"role": "user", "content": "x"}])
    gw.stop()  # the flush interval is 30 s: only the shutdown flush can have written them
    count = sqlite3.connect(tmp_path / "gw" / "costgate.db").execute("SELECT count(*) FROM ledger").fetchone()[0]
    assert count == 4


@pytest.fixture
def postgres_url() -> Iterator[str]:
    name = "costgate_test_" + secrets.token_hex(4)

    async def admin(sql: str) -> None:
        conn = await asyncpg.connect(PG + "/postgres")
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    asyncio.run(admin(f"CREATE DATABASE {name}"))
    yield f"{PG}/{name}"
    asyncio.run(admin(f"DROP DATABASE {name} WITH (FORCE)"))


def test_postgresql_ledger(tmp_path, fake_upstream, postgres_url: str) -> None:
    gw = GatewayProcess({"models": standard_models(fake_upstream.url), "database_url": postgres_url}, tmp_path / "gw")
    try:
        key = gw.new_key("team-pg")
        charged = run_traffic(gw, key)
        spend = gw.spend("team")
        assert Decimal(spend["total_usd"]) == charged
        assert spend["rows"][0]["requests"] == 8
        models = {r["group"] for r in gw.spend("model")["rows"]}
        assert models == {"small", "large"}
    finally:
        gw.stop()


def test_client_leaving_mid_stream_is_charged_for_what_was_generated(gateway: GatewayProcess, key: str) -> None:
    body = {"model": "drip", "stream": True, "messages": [{"role": "user", "content": " ".join(["w"] * 30)}]}
    with httpx.stream(
        "POST", gateway.url + "/v1/chat/completions", json=body, timeout=30, headers={"authorization": f"Bearer {key}"}
    ) as response:
        request_id = response.headers["x-costgate-request-id"]
        lines = response.iter_lines()
        first = next(line for line in lines if line.startswith("data:"))
        assert "echo" in first
    # the client hung up after one chunk of ~31; the gateway closes the upstream and settles
    deadline = time.monotonic() + 10
    row = None
    while row is None and time.monotonic() < deadline:
        gateway.spend()
        row = (
            sqlite3.connect(gateway.workdir / "costgate.db")
            .execute("SELECT completion_tokens, cost_pusd FROM ledger WHERE request_id = ?", (request_id,))
            .fetchone()
        )
    assert row is not None
    completion_tokens, cost = row
    assert 0 < completion_tokens < 31 and cost > 0


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_an_existing_database_gets_the_indexes_a_later_release_added(backend: str, tmp_path, request) -> None:
    """A database created before an index existed gains it at the next start, and starting
    again (or two replicas starting together) changes nothing."""
    from sqlalchemy import inspect, text

    import gateway.dashboard.rollup  # noqa: F401  (defines ix_ledger_live on the ledger table)
    from gateway.storage.db import create_engine, create_tables, ledger

    url = f"sqlite:///{tmp_path / 'old.db'}" if backend == "sqlite" else request.getfixturevalue("postgres_url")
    added_later = [ix for ix in ledger.indexes if ix.name in ("ix_ledger_live", "ix_ledger_created")]

    async def names(engine) -> set[str]:  # type: ignore[no-untyped-def]
        async with engine.connect() as conn:
            return await conn.run_sync(lambda c: {ix["name"] for ix in inspect(c).get_indexes("ledger")})

    async def scenario() -> tuple[set[str], set[str]]:
        engine = create_engine(url)
        try:
            await create_tables(engine)
            async with engine.begin() as conn:  # as an older release, before migrations, left it
                for index in added_later:
                    await conn.run_sync(lambda c, ix=index: ix.drop(c))
                await conn.execute(text("DROP TABLE alembic_version"))
            before = await names(engine)
            await asyncio.gather(create_tables(engine), create_tables(engine))
            return before, await names(engine)
        finally:
            await engine.dispose()

    before, after = asyncio.run(scenario())
    assert len(added_later) == 2 and not {ix.name for ix in added_later} & before
    assert {ix.name for ix in ledger.indexes} <= after


async def test_a_flush_waits_for_rows_the_background_writer_has_taken(tmp_path) -> None:
    """/admin/spend flushes before it sums: rows the background writer took a moment before
    (and has not committed yet) must be in the sum too."""
    from sqlalchemy import func, select

    from gateway.storage.db import create_engine, create_tables, ledger
    from gateway.storage.ledger import LedgerRow, LedgerWriter

    engine = create_engine(f"sqlite:///{tmp_path / 'l.db'}")
    await create_tables(engine)
    writer = LedgerWriter(engine, flush_interval_s=0.01)
    taken, insert = asyncio.Event(), writer.insert

    async def slow_insert(rows):  # type: ignore[no-untyped-def]
        taken.set()
        await asyncio.sleep(0.3)  # a slow database
        await insert(rows)

    writer.insert = slow_insert  # type: ignore[method-assign]
    writer.start()
    writer.record(
        LedgerRow(
            "r1",
            time.time(),
            "2026-11-29",
            "team",
            "k",
            None,
            None,
            None,
            "chat.completions",
            "m",
            "m",
            "openai",
            1,
            1,
            0,
            7,
            0,
            1.0,
            None,
            "miss",
            200,
            None,
        )
    )
    await taken.wait()  # the background writer holds the row, uncommitted
    await writer.flush()
    async with engine.connect() as conn:
        assert (await conn.execute(select(func.count()).select_from(ledger))).scalar() == 1
    await writer.close()
    await engine.dispose()
