"""A gateway SIGKILLed while its provider works on a batch (issue 26): started again, it polls
the same provider batch instead of submitting the lines again, and charges what the provider
billed, once. Boots `costgate serve` and the fake provider as processes: slow."""

from __future__ import annotations

import io
import json
import sqlite3
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import httpx
import pytest

from tests.support import FakeUpstream, GatewayProcess, model, wait_until

pytestmark = pytest.mark.slow

UPSTREAM = "gpt-4o-mini"


@pytest.fixture
def provider(tmp_path: Path) -> Iterator[FakeUpstream]:
    fake = FakeUpstream(tmp_path, args=("--batch-price", f"{UPSTREAM}:0.075:0.3"))  # batches end on demand
    yield fake
    fake.stop()


def bill(provider: FakeUpstream) -> dict:
    return httpx.get(f"http://127.0.0.1:{provider.port}/_bill").json()


def recorded_provider_batches(db: Path) -> int:
    """The provider batches the gateway has recorded as at the provider (read from its SQLite file)."""
    with sqlite3.connect(db) as conn:
        try:
            return conn.execute("SELECT count(*) FROM provider_batches").fetchone()[0]
        except sqlite3.OperationalError:  # the table is not made yet
            return 0


def test_a_killed_gateway_polls_the_same_provider_batch_again(tmp_path: Path, provider: FakeUpstream) -> None:
    mini = model("mini", UPSTREAM, provider.url, "0.15", "0.6", batch_api=True)
    mini["price"]["batch"] = {"input_per_mtok": "0.075", "output_per_mtok": "0.3"}
    config = {"models": [mini], "batch": {"poll_interval_s": 0.2, "lease_s": 2, "provider_poll_s": 0.2}}
    gw = GatewayProcess(config, tmp_path / "gw")
    try:
        key = gw.new_key("restart-team")
        client = gw.client(key)
        lines = [
            {
                "custom_id": f"k-{i}",
                "method": "POST",
                "url": "/v1/chat/completions",
                "body": {"model": "mini", "messages": [{"role": "user", "content": f"killed mid-batch {i}"}]},
            }
            for i in range(5)
        ]
        data = b"".join(json.dumps(x).encode() + b"\n" for x in lines)
        f = client.files.create(file=("in.jsonl", io.BytesIO(data)), purpose="batch")
        batch = client.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h")
        wait_until(lambda: recorded_provider_batches(tmp_path / "gw" / "costgate.db") == 1, timeout=30, interval=0.1)
        wait_until(lambda: bill(provider)["batches_created"] == 1, timeout=30, interval=0.1)
        # SIGKILL as soon as the provider accepted the batch: whether or not the gateway wrote the
        # provider's id yet, the next start finds the batch (by its token, docs/batch.md)
        gw.kill()
        gw.start()
        (provider_batch,) = bill(provider)["batch_ids"]
        httpx.post(f"http://127.0.0.1:{provider.port}/_batches/{provider_batch}/complete")
        client = gw.client(key)
        done = wait_until(
            lambda: (b := client.batches.retrieve(batch.id)).status in ("completed", "failed", "expired") and b,
            timeout=60,
            interval=0.2,
        )
        assert done.status == "completed" and done.request_counts.completed == 5
        billed = bill(provider)
        assert billed["batches_created"] == 1 and billed["lines"] == 5  # nothing submitted twice
        assert provider.stats().get(UPSTREAM, 0) == 0  # and nothing ran synchronously
        (row,) = [r for r in gw.spend("team")["rows"] if r["requests"] == 5]
        assert Decimal(row["cost_usd"]) == Decimal(billed["usd"]).quantize(Decimal("1e-12"))
        assert Decimal(row["provider_batch_saved_usd"]) == Decimal(row["cost_usd"])  # half price: the other half
    finally:
        gw.stop()
