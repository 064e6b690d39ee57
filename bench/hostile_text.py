"""Issue 24: every hostile text on every endpoint, streamed and not — the status each gets, what
the ledger charged against what the provider billed, and what stays reserved afterwards.

In process, as tests/reliability/test_hostile_text.py runs: the gateway app over httpx's ASGI
transport, the provider tests/fakes/fake_bytes.py on a thread (billing every UTF-8 byte of the
prompt as a token). One team (with a $1,000 budget, so every request is held and metered) per
text; each request is sent alone. Prints one line per endpoint and text.

    .venv/bin/python bench/hostile_text.py [--run 1000000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository's packages before bench/'s files
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from fastapi import FastAPI

from gateway.app import create_app
from gateway.config.settings import Settings
from tests.fakes.fake_bytes import BytesUpstream
from tests.reliability.test_hostile_text import ADMIN, ENDPOINTS, Team, bill_cost, http, models

TEXTS = {"tab": "\t", "vt": "\x0b", "ff": "\x0c", "space": " ", "nbsp": "\xa0", "ideographic-space": "\u3000"}


AFTER_S = 30  # issue 24's target: nothing reserved this long after the last answer


async def held_after(app: FastAPI, seconds: float) -> None:
    """Every budget's reservations `seconds` after the last answer (any team, not only the last)."""
    await asyncio.sleep(seconds)
    async with http(app) as admin:
        budgets = (await admin.get("/admin/budgets")).json()["data"]
    held = sum((Decimal(b["reserved_usd"]) for b in budgets), Decimal(0))
    print(f"{seconds:g} s after the last answer: {len(budgets)} budgets, ${held} reserved in all", flush=True)


async def main(run: int) -> None:
    upstream = BytesUpstream()
    with tempfile.TemporaryDirectory() as work:
        settings = Settings.model_validate(
            {
                "admin_key": ADMIN,
                "database_url": f"sqlite:///{work}/db.sqlite",
                "data_dir": f"{work}/data",
                "max_body_bytes": 8 * 1024 * 1024,
                "models": models(upstream.url, upstream.root),
                "cache": {"exact": {"enabled": False}},
            }
        )
        app = create_app(settings)
        await app.state.gateway.start()
        print(f"{run:,} of each character; status streamed/whole, ledger vs provider bill, reserved after")
        print("| text | endpoint | streamed | whole | ledger $ | billed $ | reserved $ | seconds |")
        print("|---|---|---|---|---|---|---|---|")
        try:
            for name, char in TEXTS.items():
                for endpoint, (path, billed_model, body) in ENDPOINTS.items():
                    team = await Team.create(app, f"{name}-{endpoint}", amount="1000")
                    statuses, billed, started = [], Decimal(0), time.perf_counter()
                    for stream in (True, False):
                        before = upstream.billed(billed_model)
                        response = await team.post(path, {**body(char * run), "stream": stream})
                        statuses.append(response.status_code)
                        billed += bill_cost(before, upstream.billed(billed_model))
                    ledger, reserved = await team.ledger(), await team.reserved()
                    print(
                        f"| {name} | {endpoint} | {statuses[0]} | {statuses[1]} | {ledger} | {billed} | {reserved}"
                        f" | {time.perf_counter() - started:.1f} |",
                        flush=True,
                    )
            await held_after(app, AFTER_S)
        finally:
            await app.state.gateway.stop()
            upstream.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=int, default=1_000_000)
    asyncio.run(main(parser.parse_args().run))
