"""The flex tier (issue 26 part 5), in process: batch-class requests to a model whose config
allows it are sent with `service_tier: flex` and charged the flex price when the provider says
it served them at flex; other requests go as they came, at list price. The provider is faked with
httpx.MockTransport: it honours `service_tier` and says which tier it served in the answer."""

from __future__ import annotations

from collections.abc import AsyncIterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
import pytest

from tests.gateway.in_process import chat_answer, new_key, openai_client, running_app, settings_for

ADMIN = "sk-cg-admin-flex-tier"
LIST_IN, LIST_OUT = Decimal(2) / 10**6, Decimal(8) / 10**6
FLEX_IN, FLEX_OUT = Decimal(1) / 10**6, Decimal(4) / 10**6


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[tuple[Any, list[dict[str, Any]]]]:
    sent: list[dict[str, Any]] = []

    def upstream(request: httpx.Request) -> httpx.Response:
        body = orjson.loads(request.content)
        sent.append(body)
        tier = "flex" if body.get("service_tier") == "flex" else "default"
        return httpx.Response(200, json=chat_answer(model="o3", prompt=1000, completion=100) | {"service_tier": tier})

    price = {"input_per_mtok": 2, "output_per_mtok": 8, "flex": {"input_per_mtok": 1, "output_per_mtok": 4}}
    models = [
        {"name": "reasoner", "model": "o3", "api_base": "http://up.test/v1", "price": price, "flex": True},
        {"name": "no-flex", "model": "o3", "api_base": "http://up.test/v1", "price": price},
    ]
    settings = settings_for(
        tmp_path, models, admin_key=ADMIN, cache={"exact": {"enabled": False}, "semantic": {"enabled": False}}
    )
    async with running_app(settings, httpx.MockTransport(upstream)) as application:
        yield application, sent


async def client_for(app: Any, team: str, plan: str) -> openai.AsyncOpenAI:
    return openai_client(app, await new_key(app, team, plan=plan))


@pytest.mark.parametrize(
    "plan, headers, model, tier, cost",
    [
        ("pro", {"x-costgate-priority": "batch"}, "reasoner", "flex", 1000 * FLEX_IN + 100 * FLEX_OUT),
        ("enterprise", {"x-costgate-priority": "batch"}, "reasoner", "flex", 1000 * FLEX_IN + 100 * FLEX_OUT),
        ("pro", {}, "reasoner", None, 1000 * LIST_IN + 100 * LIST_OUT),  # interactive: as it came
        ("pro", {"x-costgate-priority": "batch"}, "no-flex", None, 1000 * LIST_IN + 100 * LIST_OUT),  # not allowed
    ],
)
async def test_batch_class_runs_at_flex_and_is_charged_flex(
    app: tuple[Any, list[dict[str, Any]]],
    plan: str,
    headers: dict[str, str],
    model: str,
    tier: str | None,
    cost: Decimal,
) -> None:
    application, sent = app
    client = await client_for(application, f"team-{plan}-{model}-{len(headers)}", plan)
    raw = await client.chat.completions.with_raw_response.create(
        model=model, messages=[{"role": "user", "content": "hi"}], extra_headers=headers
    )
    assert sent[-1].get("service_tier") == tier
    assert Decimal(raw.headers["x-costgate-cost-usd"]) == cost


async def test_flex_savings_show_in_spend(app: tuple[Any, list[dict[str, Any]]]) -> None:
    application, _ = app
    client = await client_for(application, "team-flex-spend", "pro")
    await client.chat.completions.create(
        model="reasoner", messages=[{"role": "user", "content": "hi"}], extra_headers={"x-costgate-priority": "batch"}
    )
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=application), base_url="http://gw.test") as http:
        rows = (await http.get("/admin/spend?group_by=model", headers={"authorization": f"Bearer {ADMIN}"})).json()
    row = next(r for r in rows["rows"] if r["group"] == "reasoner")
    assert Decimal(row["provider_batch_saved_usd"]) >= 1000 * (LIST_IN - FLEX_IN) + 100 * (LIST_OUT - FLEX_OUT)
    assert Decimal(row["saved_usd"]) == 0


@pytest.mark.parametrize(
    "provider, charged, saved",
    [
        ("local", Decimal("0.0005"), Decimal("0.0005")),  # the engine's idle capacity: the lane's discount
        ("openai", Decimal("0.001"), Decimal(0)),  # an external API billed it in full: so is the team
        ("litellm", Decimal("0.001"), Decimal(0)),
    ],
)
def test_the_batch_lanes_discount_is_the_local_engines_only(provider: str, charged: Decimal, saved: Decimal) -> None:
    from gateway.config.models_config import ModelConfig
    from gateway.core.context import Decisions
    from gateway.upstream.calls import charge
    from gateway.upstream.deployments import Deployment
    from policies.pricing import Price, Usage
    from tests.gateway.fakes import ScriptedProvider, request

    config = ModelConfig(name="m", provider=provider, api_base="http://upstream.invalid/v1")  # type: ignore[arg-type]
    dep = Deployment(config, ScriptedProvider("m"), Price.per_million(Decimal(1), Decimal(0)), 4096)
    ctx = request(decided=Decisions(price_factor=Decimal("0.5")))
    charge(ctx, dep, Usage(1000, 0))
    assert (ctx.meter.cost, ctx.meter.saved) == (charged, saved)
