"""What if on a cascade's own recorded traffic, in-process: the samples it kept with their text
(`log_prompts: true`) replayed through a new cascade (gateway/routing/recorded.py), at
GET /admin/cascades/{name}/whatif and on the dashboard's What if page; no provider is called."""

from __future__ import annotations

import random
from pathlib import Path

import httpx
import pytest

from gateway.storage.cascade_samples import SampleRecord
from policies.quality import Sample
from tests.gateway.in_process import ADMIN_KEY, http_client, openai_model, running_app, settings_for

ADMIN = {"authorization": f"Bearer {ADMIN_KEY}"}


def no_calls(request: httpx.Request) -> httpx.Response:
    raise AssertionError(f"a what-if called a provider: {request.url}")


def settings(work: Path):
    models = [openai_model("weak"), openai_model("strong", price={"input_per_mtok": "10", "output_per_mtok": "30"})]
    cascades = [
        {"name": "auto", "tiers": ["weak", "strong"]},
        {"name": "quiet", "tiers": ["weak", "strong"]},
    ]
    return settings_for(work, models, cascades=cascades, log_prompts=True)


async def record(app, n: int) -> None:
    """n samples of `auto`: worked answers the last tier agrees with, and guesses it does not."""
    store = app.state.gateway.routing.cascades["auto"].services.store
    rng = random.Random(0)
    for i in range(n):
        a, b = rng.randint(2, 99), rng.randint(2, 99)
        q = f"A box holds {a} rows of {b} pens. How many?"
        worked = i % 3 != 0
        cheap = f"{a} * {b} = {a * b}.\n#### {a * b}" if worked else f"Maybe about {a * b + 3}?"
        texts = {"query": q, "answers": [cheap, f"#### {a * b}"]}
        await store.add(SampleRecord("auto", f"req_{i}", Sample((1.0,), (worked,)), ((0.0,),), texts))


@pytest.mark.slow  # takes seconds in process: out of the fast lane
async def test_a_cascade_s_recorded_traffic_is_replayed_without_a_call(tmp_path: Path) -> None:
    async with running_app(settings(tmp_path), transport=httpx.MockTransport(no_calls)) as app:
        await record(app, 120)
        async with http_client(app) as client:
            r = await client.get(
                "/admin/cascades/auto/whatif", params={"quality_target": "0.9", "draws": "3"}, headers=ADMIN
            )
            assert r.status_code == 200, r.text
            found = r.json()
            assert found["samples"] == 120 and found["quality_target"] == 0.9 and found["router"] is True
            report = found["report"]
            cost = report["cost_vs_last_tier"]
            assert cost["low"] <= cost["mean"] <= cost["high"] and cost["mean"] < 1.0  # it would learn, then save
            assert report["saved_usd"]["mean"] > 0 and report["agreement_with_last_tier"]["mean"] >= 0.9

            quiet = (await client.get("/admin/cascades/quiet/whatif", headers=ADMIN)).json()
            assert quiet["report"] is None and "log_prompts" in quiet["why"]
            assert (await client.get("/admin/cascades/nope/whatif", headers=ADMIN)).status_code == 404
            assert (await client.get("/admin/cascades/auto/whatif")).status_code == 401

            login = await client.post("/admin/ui/login", data={"admin_key": ADMIN_KEY})
            assert login.status_code == 303
            page = await client.get("/admin/ui/whatif")
            assert page.status_code == 200
            assert 'data-cascade="auto"' in page.text and "whatif-cost" in page.text
            assert "log_prompts" in page.text  # the quiet cascade says why it has nothing
            assert (await client.get("/admin/ui/cascades")).status_code == 200
