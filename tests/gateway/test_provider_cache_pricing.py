"""Every token at its own price (issue 26), in process: the anthropic SDK talks to the gateway
over an ASGI transport, the gateway to an Anthropic-compatible provider with a prompt cache
(tests/fakes/fake_anthropic_cache.py) that bills reads at 10% of input and writes at 125% (5
minutes) or 200% (1 hour). The client places the markers; the ledger must equal the bill."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest

from gateway.providers.base import usage_from
from policies.pricing import Usage
from tests.fakes.fake_anthropic_cache import AnthropicCacheFake
from tests.gateway.in_process import anthropic_client, new_key, running_app, settings_for

ADMIN = "sk-cg-admin-provider-cache"
NO_CACHE = {"exact": {"enabled": False}, "semantic": {"enabled": False}}
LONG = "You are a meticulous assistant. Follow the house rules. " * 120  # about 1,700 of the fake's tokens


@pytest.fixture
async def setup(tmp_path: Path) -> AsyncIterator[tuple[Any, AnthropicCacheFake]]:
    fake = AnthropicCacheFake(min_tokens=1024)
    settings = settings_for(tmp_path, [fake.deployment()], admin_key=ADMIN, cache=NO_CACHE)
    async with running_app(settings, httpx.ASGITransport(app=fake.app)) as app:
        yield app, fake


async def client_for(app: Any, team: str) -> anthropic.AsyncAnthropic:
    return anthropic_client(app, await new_key(app, team))  # the team's id is its name's row: spend groups by id


async def spend_by_team(app: Any) -> dict[str, dict[str, str]]:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw.test") as http:
        auth = {"authorization": f"Bearer {ADMIN}"}
        rows = (await http.get("/admin/spend?group_by=team", headers=auth)).json()
        names = {t["id"]: t["name"] for t in (await http.get("/admin/teams", headers=auth)).json()["data"]}
        metrics = (await http.get("/metrics", headers={"authorization": f"Bearer {ADMIN}"})).text
    return {names[r["group"]]: r for r in rows["rows"]} | {"metrics": {"text": metrics}}


def system(ttl: str | None) -> list[dict[str, Any]]:
    marker: dict[str, Any] = {"type": "ephemeral"} | ({"ttl": ttl} if ttl else {})
    return [{"type": "text", "text": LONG, "cache_control": marker}]


@pytest.mark.parametrize("ttl", [None, "1h"])
async def test_cache_reads_and_writes_charged_as_billed(setup: tuple[Any, AnthropicCacheFake], ttl: str | None) -> None:
    app, fake = setup
    client = await client_for(app, "team-cache")
    charged = Decimal(0)
    for question in ("first question", "second question", "third question"):
        raw = await client.messages.with_raw_response.create(
            model="claude", max_tokens=50, system=system(ttl), messages=[{"role": "user", "content": question}]
        )
        charged += Decimal(raw.headers["x-costgate-cost-usd"])
    usages = [r["usage"] for r in fake.bill.requests]
    assert usages[0]["cache_creation_input_tokens"] > 1024 and usages[1]["cache_read_input_tokens"] > 1024
    assert usages[0]["cache_creation"]["ephemeral_1h_input_tokens" if ttl else "ephemeral_5m_input_tokens"] > 0
    billed = fake.bill.total()
    assert charged == billed  # each write at 1.25x (or 2x), each read at 0.1x, to the pico-dollar

    row = (await spend_by_team(app))["team-cache"]
    assert Decimal(row["cost_usd"]) == billed
    uncached = sum(fake.bill.uncached_input_usd.values(), Decimal(0))
    input_billed = sum(fake.bill.input_usd.values(), Decimal(0))
    assert Decimal(row["provider_cache_saved_usd"]) == uncached - input_billed > 0
    assert Decimal(row["saved_usd"]) == 0 and Decimal(row["provider_batch_saved_usd"]) == 0


async def test_metrics_count_cache_tokens_and_the_saving(setup: tuple[Any, AnthropicCacheFake]) -> None:
    app, _ = setup
    client = await client_for(app, "team-metrics")
    for question in ("one", "two"):
        await client.messages.create(
            model="claude", max_tokens=50, system=system(None), messages=[{"role": "user", "content": question}]
        )
    text = (await spend_by_team(app))["metrics"]["text"]
    assert 'costgate_tokens_total{kind="cache_write",model="claude",team="team-metrics"}' in text
    assert 'costgate_tokens_total{kind="cache_read",model="claude",team="team-metrics"}' in text
    assert 'costgate_saved_usd_total{model="claude",reason="provider_cache",team="team-metrics"}' in text
    assert 'costgate_provider_cache_write_premium_usd_total{model="claude",team="team-metrics"}' in text


@pytest.mark.parametrize(
    "reported, expected",
    [
        # OpenAI: reads only
        (
            {"prompt_tokens": 100, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 64}},
            Usage(100, 5, 64),
        ),
        # litellm's answer from an Anthropic upstream: writes, split by TTL
        (
            {
                "prompt_tokens": 3000,
                "completion_tokens": 5,
                "cache_creation_input_tokens": 2000,
                "prompt_tokens_details": {
                    "cached_tokens": 500,
                    "cache_creation_tokens": 2000,
                    "cache_creation_token_details": {
                        "ephemeral_5m_input_tokens": 1500,
                        "ephemeral_1h_input_tokens": 500,
                    },
                },
            },
            Usage(3000, 5, 500, cache_write_tokens=1500, cache_write_1h_tokens=500),
        ),
        # only the top-level count: 5-minute writes, Anthropic's default
        (
            {"prompt_tokens": 3000, "completion_tokens": 5, "cache_creation_input_tokens": 2000},
            Usage(3000, 5, 0, 0, 2000),
        ),
    ],
)
def test_usage_reads_cache_writes(reported: dict[str, Any], expected: Usage) -> None:
    assert usage_from(reported) == expected


async def test_the_savings_page_shows_what_the_provider_cache_saved(setup: tuple[Any, AnthropicCacheFake]) -> None:
    app, fake = setup
    client = await client_for(app, "team-page")
    for question in ("one", "two"):
        await client.messages.create(
            model="claude", max_tokens=50, system=system(None), messages=[{"role": "user", "content": question}]
        )
    saved = (await spend_by_team(app))["team-page"]["provider_cache_saved_usd"]
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw.test") as http:
        login = await http.post("/admin/ui/login", data={"admin_key": ADMIN})
        assert login.status_code == 303, login.text
        page = await http.get("/admin/ui/savings")
    assert page.status_code == 200
    table = page.text[page.text.index('id="provider-savings"') :]
    assert "team-page" in table and f"${saved}" in table and Decimal(saved) > 0


async def test_a_streamed_answer_is_charged_its_cache_reads_and_writes(setup: tuple[Any, AnthropicCacheFake]) -> None:
    """message_start carries the input side (reads, writes by TTL); the ledger prices it as billed."""
    app, fake = setup
    client = await client_for(app, "team-stream")
    charged = Decimal(0)
    for question in ("first", "second"):
        async with client.messages.stream(
            model="claude", max_tokens=50, system=system("1h"), messages=[{"role": "user", "content": question}]
        ) as stream:
            await stream.get_final_message()
        await asyncio.sleep(0)
    usages = [r["usage"] for r in fake.bill.requests]
    assert usages[0]["cache_creation"]["ephemeral_1h_input_tokens"] > 0 and usages[1]["cache_read_input_tokens"] > 0
    row = (await spend_by_team(app))["team-stream"]
    charged = Decimal(row["cost_usd"])
    assert charged == fake.bill.total()
