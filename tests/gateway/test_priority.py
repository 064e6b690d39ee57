"""Priority classes through the whole pipeline, in process: the openai SDK talks to the app over
httpx's ASGI transport, and the model's two replicas are played by httpx.MockTransport."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
import pytest

from gateway.app import create_app
from gateway.config.settings import Settings
from gateway.service import Gateway

ANSWER = {
    "id": "x",
    "object": "chat.completion",
    "model": "m",
    "created": 0,
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
}


@pytest.fixture(scope="module")
async def app_and_calls(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[Any, list[dict]]]:
    calls: list[dict[str, Any]] = []

    def upstream(request: httpx.Request) -> httpx.Response:
        calls.append({"host": request.url.host, **orjson.loads(request.content)})
        return httpx.Response(200, json=ANSWER)

    work: Path = tmp_path_factory.mktemp("priority")
    settings = Settings.model_validate(
        {
            "admin_key": "sk-cg-admin-priority-test",
            "database_url": f"sqlite:///{work}/db.sqlite",
            "data_dir": str(work / "data"),
            "cache": {"exact": {"enabled": False}},  # each test asks "hi" again and must reach the upstream
            "models": [
                {
                    "name": "m",
                    "provider": "openai",
                    "api_base": "http://r0.test/v1",
                    "replicas": ["http://r1.test/v1"],
                    "admission": {"forward_priority": True},  # vLLM servers
                    "price": {"input_per_mtok": "0.1", "output_per_mtok": "0.5"},
                }
            ],
        }
    )  # cheap: free keys may use it
    app = create_app(settings, transport=httpx.MockTransport(upstream))
    gateway: Gateway = app.state.gateway
    await gateway.start()
    yield app, calls
    await gateway.stop()


async def client_for(app: Any, plan: str) -> openai.AsyncOpenAI:
    gateway: Gateway = app.state.gateway
    team = f"team-{plan}"
    if team not in [t.name for t in await gateway.keys.list_teams()]:
        await gateway.keys.create_team(team)
    _, secret = await gateway.keys.create_key(team, plan=plan)
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw.test")
    return openai.AsyncOpenAI(base_url="http://gw.test/v1", api_key=secret, http_client=http, max_retries=0)


@pytest.mark.parametrize(
    "plan, header, vllm_priority",
    [
        ("pro", None, 0),
        ("pro", "realtime", -1),
        ("pro", "batch", 1),
        ("free", None, 1),  # free keys default to the batch class
        ("free", "realtime", 0),  # and may not rise above interactive
        ("enterprise", "Realtime", -1),
    ],
)
async def test_class_reaches_vllm_as_priority(app_and_calls, plan: str, header: str | None, vllm_priority: int) -> None:
    app, calls = app_and_calls
    client = await client_for(app, plan)
    headers = {"x-costgate-priority": header} if header else {}
    completion = await client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}], extra_headers=headers
    )
    assert completion.choices[0].message.content == "ok"
    assert calls[-1]["priority"] == vllm_priority
    assert calls[-1]["host"] in ("r0.test", "r1.test")


async def test_unknown_class_is_400(app_and_calls) -> None:
    app, calls = app_and_calls
    client = await client_for(app, "pro")
    sent = len(calls)
    with pytest.raises(openai.BadRequestError) as err:
        await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], extra_headers={"x-costgate-priority": "urgent"}
        )
    assert err.value.body["param"] == "x-costgate-priority"
    assert len(calls) == sent  # refused before any upstream call


async def test_replica_metrics(app_and_calls) -> None:
    app, _ = app_and_calls
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw.test") as http:
        text = (await http.get("/metrics")).text
    for replica in ("m@0", "m@1"):
        assert f'costgate_replica_up{{model="m",replica="{replica}"}} 1.0' in text
        for cls in ("realtime", "interactive", "batch"):  # nothing in flight: every weight released
            assert f'costgate_replica_outstanding_tokens{{model="m",priority="{cls}",replica="{replica}"}} 0.0' in text
