"""Stored samples keep their weights, and a database from before issue 13 gains the column."""

from __future__ import annotations

import asyncio
from pathlib import Path

from sqlalchemy import text

from gateway.storage.cascade_samples import SampleRecord, SampleStore
from gateway.storage.db import create_engine
from policies.quality import Sample
from tests.gateway.budget_support import fresh_postgres

OLD_TABLE = """CREATE TABLE cascade_samples (id INTEGER PRIMARY KEY, cascade VARCHAR(200) NOT NULL,
    created_at FLOAT NOT NULL, request_id VARCHAR(40), confidences TEXT NOT NULL, agrees TEXT NOT NULL,
    features TEXT, feature_set TEXT, texts TEXT)"""


async def round_trip(url: str) -> tuple[list[Sample], list[float]]:
    engine = create_engine(url)
    try:
        async with engine.begin() as conn:  # the table as issue 5 made it, with one old row
            await conn.execute(
                text(
                    OLD_TABLE.replace("INTEGER PRIMARY KEY", "SERIAL PRIMARY KEY")
                    if url.startswith("postgresql")
                    else OLD_TABLE
                )
            )
            await conn.execute(
                text(
                    "INSERT INTO cascade_samples (cascade, created_at, confidences, agrees, "
                    "features, feature_set) VALUES ('c', 0, '[0.9]', '[true]', '[[1.0]]', 'x')"
                )
            )
        store = SampleStore(engine)
        await store.create()
        await store.create()  # idempotent, as every start runs it
        await store.add(SampleRecord("c", "r1", Sample((0.4,), (False,), 12.5), ((0.0,),)))
        recent = await store.recent("c", 10)
        rows = [r.weight for r in await store.training_rows("c")]
    finally:
        await engine.dispose()
    return recent, rows


def test_sqlite_gains_the_weight_column(tmp_path: Path) -> None:
    recent, _ = asyncio.run(round_trip(f"sqlite:///{tmp_path / 'old.db'}"))
    assert recent == [Sample((0.9,), (True,), 1.0), Sample((0.4,), (False,), 12.5)]


def test_postgres_gains_the_weight_column() -> None:
    with fresh_postgres() as url:
        recent, _ = asyncio.run(round_trip(url))
    assert recent == [Sample((0.9,), (True,), 1.0), Sample((0.4,), (False,), 12.5)]


def test_training_rows_carry_weights_and_skip_other_feature_sets(tmp_path: Path) -> None:
    _, weights = asyncio.run(round_trip(f"sqlite:///{tmp_path / 'old.db'}"))
    assert weights == [12.5]  # the old row was made with another feature set; the new one counts, weighted
