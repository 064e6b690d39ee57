"""Every upstream call a cascade makes goes through the one guarded call (gateway/routing/guarded_call.py):
its tiers, its judge and its shadow samples are refused while their deployment's breaker is open,
their failures open it, and they carry the request's priority class to the upstream's admission.

In process: the openai SDK talks to the app over httpx's ASGI transport; the three deployments
(two tiers and a judge, vLLM servers that take a `priority` field) are played by MockTransport."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
import pytest

from gateway.app import create_app
from gateway.config.settings import Settings
from gateway.service import Gateway
from policies.breaker import State

TEAM = "guarded-team"


def answer(text: str) -> dict[str, Any]:
    return {
        "id": "x",
        "object": "chat.completion",
        "model": "m",
        "created": 0,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    }


@dataclass
class Upstreams:
    """What each deployment was sent (its name, then the body either replica got), and which
    deployments answer 500."""

    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    failing: set[str] = field(default_factory=set)
    grade: str = "2"  # the judge's grade: low, so the cheap answer escalates

    def __call__(self, request: httpx.Request) -> httpx.Response:
        name = request.url.host.split(".")[0].removesuffix("-2")
        self.calls.append((name, orjson.loads(request.content)))
        if name in self.failing:
            return httpx.Response(500, json={"error": {"message": "down", "type": "server_error"}})
        return httpx.Response(200, json=answer(self.grade if name == "grader" else f"from {name}"))

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]


def vllm(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "provider": "openai",
        "api_base": f"http://{name}.test/v1",
        "replicas": [f"http://{name}-2.test/v1"],  # replicas are admitted by class (engine/admission.py)
        "admission": {"forward_priority": True},  # vLLM servers: the class rides as `priority`
        "max_retries": 0,
        "price": {"input_per_mtok": "0.1", "output_per_mtok": "0.5"},  # cheap: free keys may use them
    }


@asynccontextmanager
async def running(tmp_path: Path, shadow_rate: float) -> AsyncIterator[tuple[Any, Upstreams]]:
    upstreams = Upstreams()
    settings = Settings.model_validate(
        {
            "admin_key": "sk-cg-admin-guarded-test",
            "database_url": f"sqlite:///{tmp_path}/db.sqlite",
            "data_dir": str(tmp_path / "data"),
            "cache": {"exact": {"enabled": False}},
            "models": [vllm("weak"), vllm("strong"), vllm("grader")],
            "cascades": [
                {
                    "name": "auto",
                    "tiers": ["weak", "strong"],
                    "scorer": "judge:grader",
                    "adaptive": False,
                    "thresholds": [0.5],
                    "shadow_rate": shadow_rate,
                }
            ],
            # one failure opens a breaker for every team, for longer than a test runs
            "breaker": {"min_requests": 1, "max_error_rate": 0.0, "min_failing_teams": 1, "open_s": 600},
        }
    )
    app = create_app(settings, transport=httpx.MockTransport(upstreams))
    gw: Gateway = app.state.gateway
    await gw.start()
    try:
        yield app, upstreams
    finally:
        await gw.stop()


@pytest.fixture
async def gateway(tmp_path: Path) -> AsyncIterator[tuple[Any, Upstreams]]:
    async with running(tmp_path, shadow_rate=0.0) as started:
        yield started


@pytest.fixture
async def shadowed(tmp_path: Path) -> AsyncIterator[tuple[Any, Upstreams]]:
    """Every accepted answer is shadow-sampled: the last tier is asked after the request."""
    async with running(tmp_path, shadow_rate=1.0) as started:
        started[1].grade = "9"  # the cheap answer is accepted
        yield started


async def client_for(app: Any, plan: str = "pro") -> openai.AsyncOpenAI:
    gw: Gateway = app.state.gateway
    await gw.keys.create_team(TEAM)
    _, secret = await gw.keys.create_key(TEAM, plan=plan)
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw")
    return openai.AsyncOpenAI(base_url="http://gw.test/v1", api_key=secret, http_client=http, max_retries=0)


async def ask(client: openai.AsyncOpenAI, **extra: Any) -> str | None:
    completion = await client.chat.completions.create(
        model="auto", messages=[{"role": "user", "content": "what is 3 + 4?"}], **extra
    )
    return completion.choices[0].message.content


def open_breaker(app: Any, name: str) -> None:
    gw: Gateway = app.state.gateway
    gw.breakers.record(name, False, "another-team")
    assert gw.breakers[name].view().state is State.OPEN


async def test_a_batch_requests_tier_and_judge_calls_carry_the_batch_class(gateway) -> None:
    app, upstreams = gateway
    client = await client_for(app)
    assert await ask(client, extra_headers={"x-costgate-priority": "batch"}) == "from strong"  # graded 2/10: escalated
    assert upstreams.names() == ["weak", "grader", "strong"]
    assert [body.get("priority") for _, body in upstreams.calls] == [1, 1, 1]  # vLLM's batch priority


async def test_a_realtime_requests_cheap_tier_is_admitted_as_realtime(gateway) -> None:
    app, upstreams = gateway
    client = await client_for(app, plan="enterprise")
    await ask(client, extra_headers={"x-costgate-priority": "realtime"})
    assert [body.get("priority") for _, body in upstreams.calls] == [-1, -1, -1]


async def test_an_open_judge_breaker_refuses_the_grade_and_the_request_escalates(gateway) -> None:
    app, upstreams = gateway
    open_breaker(app, "grader")
    client = await client_for(app)
    assert await ask(client) == "from strong"  # no grade: the cheap answer is not trusted
    assert upstreams.names() == ["weak", "strong"]  # the judge was never called


async def test_a_failing_judge_opens_its_breaker(gateway) -> None:
    app, upstreams = gateway
    upstreams.failing.add("grader")
    client = await client_for(app)
    assert await ask(client) == "from strong"
    gw: Gateway = app.state.gateway
    assert gw.breakers["grader"].view().errors == 1
    assert gw.breakers["grader"].view().state is State.OPEN
    tried = upstreams.names().count("grader")  # both replicas, tried in turn
    await ask(client)
    assert upstreams.names().count("grader") == tried  # the second request's grade was refused


async def test_an_open_tier_breaker_skips_the_tier_and_a_failing_tier_opens_it(gateway) -> None:
    app, upstreams = gateway
    upstreams.failing.add("weak")
    client = await client_for(app)
    assert await ask(client) == "from strong"
    gw: Gateway = app.state.gateway
    assert gw.breakers["weak"].view().state is State.OPEN
    tried = upstreams.names().count("weak")
    await ask(client)
    assert upstreams.names().count("weak") == tried  # then skipped


async def shadow_done(app: Any) -> None:
    gw: Gateway = app.state.gateway
    await gw.routing.cascades["auto"].drain()


async def test_a_shadow_sample_runs_in_its_requests_class(shadowed) -> None:
    app, upstreams = shadowed
    client = await client_for(app)
    assert await ask(client, extra_headers={"x-costgate-priority": "batch"}) == "from weak"
    await shadow_done(app)
    assert upstreams.names() == ["weak", "grader", "strong"]  # the shadow asked the last tier
    assert [body.get("priority") for _, body in upstreams.calls] == [1, 1, 1]


async def test_an_open_breaker_refuses_a_shadow_samples_call(shadowed) -> None:
    app, upstreams = shadowed
    open_breaker(app, "strong")
    client = await client_for(app)
    assert await ask(client) == "from weak"
    await shadow_done(app)
    assert upstreams.names() == ["weak", "grader"]  # the shadow's last-tier call was refused
