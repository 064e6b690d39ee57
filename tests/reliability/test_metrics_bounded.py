"""Bounded metrics (issue 16, item 5): thousands of requests with made-up model names, tags,
users, metadata and keys do not grow /metrics; with `metrics_key` set, /metrics needs it."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator

import httpx
import pytest

from tests.support import ADMIN_KEY, FakeUpstream, GatewayProcess, model

pytestmark = pytest.mark.slow  # boots processes: not in the fast lane

METRICS_KEY = "sk-cg-metrics-" + secrets.token_hex(12)


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream) -> Iterator[GatewayProcess]:
    models = [model("small", "echo-small", fake_upstream.url), model("flaky", "fail-500", fake_upstream.url)]
    gateway = GatewayProcess({"models": models, "metrics_key": METRICS_KEY}, tmp_path_factory.mktemp("gw-metrics"))
    yield gateway
    gateway.stop()


def scrape(gw: GatewayProcess) -> str:
    response = httpx.get(gw.url + "/metrics", headers={"authorization": f"Bearer {METRICS_KEY}"})
    assert response.status_code == 200
    return response.text


async def hostile_traffic(gw: GatewayProcess, key: str, count: int) -> list[int]:
    """`count` requests, each with names nobody configured: every field a label could take."""
    limit = asyncio.Semaphore(16)

    async def one(client: httpx.AsyncClient, i: int) -> int:
        made_up = secrets.token_hex(6)
        auth = key if i % 4 else f"sk-cg-{made_up}"  # a quarter with keys that do not exist
        body = {
            "model": ("small", "flaky", f"model-{made_up}")[i % 3],
            "user": f"user-{made_up}",
            "metadata": {f"k{made_up}": made_up},
            "messages": [{"role": "user", "content": "hi"}],
        }
        headers = {
            "authorization": f"Bearer {auth}",
            "x-costgate-tags": f"tag-{made_up},team={made_up}",
            "x-costgate-trace-id": made_up,
        }
        path = ("/v1/chat/completions", "/v1/completions")[i % 2]
        if path == "/v1/completions":
            body["prompt"] = body.pop("messages")[0]["content"]
        async with limit:
            return (await client.post(gw.url + path, json=body, headers=headers)).status_code

    async with httpx.AsyncClient(timeout=60) as client:
        return await asyncio.gather(*(one(client, i) for i in range(count)))


def test_made_up_names_do_not_grow_metrics(gw: GatewayProcess) -> None:
    key = gw.new_key("team-metrics")
    statuses = asyncio.run(hostile_traffic(gw, key, 60))  # every kind of label seen once
    assert {200, 401, 404, 502} <= set(statuses)
    warm = len(scrape(gw))
    statuses = asyncio.run(hostile_traffic(gw, key, 3000))
    assert statuses.count(404) >= 700 and statuses.count(401) >= 700  # the made-up names were refused
    text = scrape(gw)
    assert len(text) - warm < 8 * 1024, f"/metrics grew from {warm} to {len(text)} bytes"
    assert 'model="unknown"' in text
    assert "model-" not in text and "user-" not in text and "tag-" not in text
    assert 'costgate_unauthenticated_requests_total{area="v1"}' in text


@pytest.mark.parametrize(
    "auth, status",
    [
        (None, 401),
        ("Bearer nope", 401),
        (f"Bearer {METRICS_KEY}", 200),
        (f"Bearer {ADMIN_KEY}", 200),
        ("team key", 401),
    ],
    ids=["none", "wrong", "metrics-key", "admin-key", "team-key"],  # the keys are random: not in the ids
)
def test_metrics_need_the_metrics_key_when_one_is_set(gw: GatewayProcess, auth: str | None, status: int) -> None:
    if auth == "team key":
        auth = f"Bearer {gw.new_key('team-scraper')}"
    response = httpx.get(gw.url + "/metrics", headers={"authorization": auth} if auth else {})
    assert response.status_code == status
    if status == 401:
        assert response.json()["error"]["type"] == "authentication_error"
        assert "costgate_" not in response.text
    else:
        assert "costgate_requests_total" in response.text
