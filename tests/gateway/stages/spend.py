"""A real SpendControl for the rate-limit and budget stage tests: budgets in SQLite, counters
in the in-process store (or a Redis nobody listens on, for outages), metrics on a registry of
its own."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from gateway.config.settings import Settings
from gateway.spend.spend_control import SpendControl
from gateway.storage.db import create_engine, create_tables
from gateway.storage.ledger import LedgerWriter


@asynccontextmanager
async def spend_control(work: Path, **settings: Any) -> AsyncIterator[SpendControl]:
    config = Settings.model_validate(
        {
            "database_url": f"sqlite:///{work / 'costgate.db'}",
            "data_dir": str(work),
            "budgets": {"backend": "memory"},
            **settings,
        }
    )
    engine = create_engine(config.database_url)
    await create_tables(engine)
    control = SpendControl(config, engine, LedgerWriter(engine), CollectorRegistry())
    try:
        yield control
    finally:
        await control.stop()
        await engine.dispose()


def refusals(control: SpendControl, reason: str, scope: str) -> float:
    """The `costgate_budget_refusals_total` count for one reason and scope."""
    for family in control.metrics.refused.collect():
        for sample in family.samples:
            if sample.name.endswith("_total") and sample.labels == {"reason": reason, "scope": scope}:
                return sample.value
    return 0.0
