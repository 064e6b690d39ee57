"""One team's failing requests do not cut the other teams off (issue 24, item 5).

The upstream (tests/fakes/content_faults.py) answers 500 to every request that holds a word only
the hostile team sends, as a provider can for content that trips it. The hostile team makes 40
such requests, then another team asks the same model 10 times: all 10 are served, on the
openai path, the litellm path and a cascade's tiers, while the hostile team's own next request
is refused without an upstream call (its own breaker). The gateway runs in process; the
official openai SDK is the client."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from gateway.app import create_app
from gateway.config.settings import Settings
from gateway.service import Gateway
from tests.fakes.content_faults import ContentFaultUpstream

PRICE = {"input_per_mtok": "1", "output_per_mtok": "2"}
ADMIN = "sk-cg-admin-tenant-isolation"


@pytest.fixture(scope="module")
def upstream() -> Iterator[ContentFaultUpstream]:
    fake = ContentFaultUpstream(trigger="POISON", status=500)
    yield fake
    fake.close()


def settings(work: Path, url: str) -> Settings:
    plain = {"provider": "openai", "api_base": url, "max_retries": 0, "price": PRICE}
    return Settings.model_validate(
        {
            "admin_key": ADMIN,
            "database_url": f"sqlite:///{work}/db.sqlite",
            "data_dir": str(work / "data"),
            "cache": {"exact": {"enabled": False}},  # every request must reach the upstream
            # the breaker at its defaults: 20 outcomes in 60 s, more than 5% failed
            "models": [
                {"name": "direct", "model": "gpt-direct", **plain},
                {"name": "cheap", "model": "gpt-cheap", **plain},
                {"name": "strong", "model": "gpt-strong", **plain},
                {
                    "name": "via-litellm",
                    "provider": "litellm",
                    "model": "openai/gpt-litellm",
                    "api_base": url,
                    "api_key": "sk-fake-provider",
                    "max_retries": 0,
                    "price": PRICE,
                },
            ],
            "cascades": [{"name": "tiered", "tiers": ["cheap", "strong"], "shadow_rate": 0.0}],
        }
    )


@pytest.fixture
async def app(tmp_path: Path, upstream: ContentFaultUpstream) -> AsyncIterator[Any]:
    application = create_app(settings(tmp_path, upstream.url))
    gateway: Gateway = application.state.gateway
    await gateway.start()
    yield application
    await gateway.stop()


async def client_for(app: Any, team: str) -> openai.AsyncOpenAI:
    gateway: Gateway = app.state.gateway
    await gateway.keys.create_team(team)
    _, secret = await gateway.keys.create_key(team)
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw.test")
    return openai.AsyncOpenAI(base_url="http://gw.test/v1", api_key=secret, http_client=http, max_retries=0)


async def ask(client: openai.AsyncOpenAI, model: str, text: str) -> int:
    """The status the gateway answered with."""
    try:
        await client.chat.completions.create(model=model, messages=[{"role": "user", "content": text}])
    except openai.APIStatusError as err:
        return err.status_code
    return 200


async def breakers(app: Any) -> dict[str, dict[str, Any]]:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw.test") as http:
        answer = await http.get("/admin/breakers", headers={"authorization": f"Bearer {ADMIN}"})
    return {b["deployment"]: b for b in answer.json()["data"]}


@pytest.mark.parametrize(
    "model, tiers", [("direct", ["direct"]), ("via-litellm", ["via-litellm"]), ("tiered", ["cheap", "strong"])]
)
async def test_another_team_is_served_while_one_teams_requests_fail(
    app: Any, upstream: ContentFaultUpstream, model: str, tiers: list[str]
) -> None:
    hostile, other = await client_for(app, "hostile"), await client_for(app, "other")
    statuses = [await ask(hostile, model, f"POISON {i}") for i in range(40)]
    assert set(statuses[:20]) == {502}  # the provider's 500s, relayed as upstream errors
    assert set(statuses[20:]) == {503}  # then the hostile team's own breaker refuses it

    served = [await ask(other, model, f"an ordinary question {i}") for i in range(10)]
    assert served == [200] * 10

    views = await breakers(app)
    assert [views[t]["state"] for t in tiers] == ["closed"] * len(tiers)
    assert [views[t]["teams_open"] for t in tiers] == [1] * len(tiers)  # the hostile team, cut off alone
    failed = upstream.calls["failed"]
    assert await ask(hostile, model, "POISON again") == 503
    assert upstream.calls["failed"] == failed  # refused without calling the provider


@pytest.mark.slow  # takes seconds in process: out of the fast lane
async def test_a_few_failures_among_many_teams_calls_cut_nobody_off(app: Any) -> None:
    """The litellm case of the issue: two failures in 34 calls opened the model for everyone."""
    hostile, other = await client_for(app, "hostile"), await client_for(app, "other")
    for i in range(32):
        assert await ask(other, "via-litellm", f"question {i}") == 200
    assert [await ask(hostile, "via-litellm", f"POISON {i}") for i in range(2)] == [502, 502]
    assert [await ask(other, "via-litellm", f"more {i}") for i in range(10)] == [200] * 10
