"""The router before the call through a running gateway, in-process: when it says the cheap
answer will not be accepted, the cheap tier is never called and the last tier answers (counted
in /admin/cascades); on its explore share the cheap tier is asked as before."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import httpx
import numpy as np

from policies.precall import QUERY_FEATURES, PrecallRouter
from policies.scorers.learned import LogisticModel
from tests.gateway.in_process import (
    ADMIN_KEY,
    chat_answer,
    http_client,
    new_key,
    openai_model,
    running_app,
    settings_for,
)

STRONG = {"input_per_mtok": "10", "output_per_mtok": "30"}  # the weak tier: 1 and 2


def router(accept: bool, explore: float = 0.0) -> PrecallRouter:
    """A router sure of its answer for every query: accepted (bias +50) or not (-50)."""
    n = len(QUERY_FEATURES)
    model = LogisticModel(
        tuple(f"f{i}" for i in range(n)), np.zeros(n), np.ones(n), np.zeros(n), 50.0 if accept else -50.0
    )
    return PrecallRouter(model, auc=0.9, rows=100, explore=explore)


async def test_a_router_that_expects_a_rejection_goes_straight_to_the_last_tier(tmp_path: Path) -> None:
    calls: list[str] = []

    def upstream(request: httpx.Request) -> httpx.Response:
        model = json.loads(request.content)["model"]
        calls.append(model)
        return httpx.Response(200, json=chat_answer("#### 4", model=model))

    cascade = {"name": "auto", "tiers": ["weak", "strong"], "adaptive": False, "thresholds": [0.5], "shadow_rate": 0.0}
    settings = settings_for(tmp_path, [openai_model("weak"), openai_model("strong", price=STRONG)], cascades=[cascade])
    async with running_app(settings, transport=httpx.MockTransport(upstream)) as app:
        key = await new_key(app)
        target = app.state.gateway.routing.cascades["auto"]
        ask = {"model": "auto", "messages": [{"role": "user", "content": "What is 2 + 2?"}]}
        async with http_client(app) as client:
            target.slot.replace(replace(target.state, router=router(accept=False)))
            r = await client.post("/v1/chat/completions", json=ask, headers={"authorization": f"Bearer {key}"})
            assert r.status_code == 200 and r.headers["x-costgate-model"] == "strong"
            assert calls == ["strong"]  # the cheap call was never made
            target.slot.replace(replace(target.state, router=router(accept=True)))
            r = await client.post("/v1/chat/completions", json=ask, headers={"authorization": f"Bearer {key}"})
            assert r.headers["x-costgate-model"] == "weak" and calls == ["strong", "weak"]
            target.slot.replace(
                replace(target.state, router=router(accept=False, explore=1.0))
            )  # always explored: asked as before
            r = await client.post("/v1/chat/completions", json=ask, headers={"authorization": f"Bearer {key}"})
            assert r.headers["x-costgate-model"] == "weak" and calls[-1] == "weak"
            view = (await client.get("/admin/cascades", headers={"authorization": f"Bearer {ADMIN_KEY}"})).json()
            assert view["data"][0]["router"]["routed"] == 1 and view["data"][0]["router"]["trained"]
