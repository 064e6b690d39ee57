"""A 10-line batch through the gateway to a fake OpenAI-compatible provider with a Batch API
(issue 26): the team's ledger against the provider's bill, and what the batch price saved
against list price. In process (the fake provider is a local server in a thread).

Run: `LITELLM_LOCAL_MODEL_COST_MAP=True .venv/bin/python -m bench.provider_batch`
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from decimal import Decimal
from pathlib import Path

from tests.gateway.in_process import ledger_rows, new_key, openai_client, running_app
from tests.gateway.test_provider_batches import (
    LIST_IN,
    LIST_OUT,
    PICO,
    FakeProvider,
    line,
    settings_for,
    submit,
    wait_for,
)


async def main() -> None:
    provider = FakeProvider(0.2)
    try:
        with tempfile.TemporaryDirectory() as work:
            async with running_app(settings_for(Path(work), provider)) as app:
                client = openai_client(app, await new_key(app, "bench-team"))
                lines = [
                    line(f"doc-{i}", f"summarize document number {i}: " + "lorem ipsum " * (5 * i)) for i in range(10)
                ]
                started = time.perf_counter()
                batch = await submit(client, lines)
                done = await wait_for(client, batch.id, {"completed", "failed", "expired", "cancelled"})
                took = time.perf_counter() - started
                rows = [r for r in await ledger_rows(app) if r["status"] == 200]
                bill = await provider.get("/_bill")
                stats = await provider.get("/_stats")
    finally:
        provider.stop()
    ledger = sum((Decimal(r["cost_pusd"]) for r in rows), Decimal(0)) * PICO
    list_price = sum(r["prompt_tokens"] * LIST_IN + r["completion_tokens"] * LIST_OUT for r in rows)
    saved = sum((Decimal(r["provider_tier_saved_pusd"]) for r in rows), Decimal(0)) * PICO
    print(f"batch {done.status}: {done.request_counts.completed} lines in {took:.1f} s")
    print(f"provider batches created: {bill['batches_created']}, synchronous calls: {sum(stats.values())}")
    billed = Decimal(bill["usd"]).quantize(PICO)
    print(f"provider's bill:  ${billed}")
    print(f"team's ledger:    ${ledger}  (difference ${ledger - billed:f})")
    print(f"at list price:    ${list_price.quantize(PICO)}; provider_tier_saved ${saved} ({saved / list_price:.0%})")


if __name__ == "__main__":
    asyncio.run(main())
