"""The semantic cache at its defaults never serves the opposite question (issue 27 item 4), in
process: the openai SDK talks to the app over httpx's ASGI transport, and the upstream is an
httpx.MockTransport that answers each question with its own text, so an answer says which
question it was made for."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import openai
import orjson
import pytest

from gateway.app import create_app
from gateway.config.settings import Settings
from gateway.service import Gateway

STORED = "What should I eat after a workout to gain muscle mass?"


def echo(request: httpx.Request) -> httpx.Response:
    question = orjson.loads(request.content)["messages"][-1]["content"]
    return httpx.Response(
        200,
        json={
            "id": "x",
            "object": "chat.completion",
            "model": "m",
            "created": 0,
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": f"echo: {question}"}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 12, "completion_tokens": 12, "total_tokens": 24},
        },
    )


@pytest.fixture(scope="module")
async def client(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[openai.AsyncOpenAI]:
    work: Path = tmp_path_factory.mktemp("opposites")
    settings = Settings.model_validate(
        {
            "admin_key": "sk-cg-admin-opposites-test",
            "database_url": f"sqlite:///{work}/db.sqlite",
            "data_dir": str(work / "data"),
            "cache": {"semantic": {"enabled": True}},  # the defaults: max_false_hit_rate 0.05
            "models": [
                {
                    "name": "m",
                    "provider": "openai",
                    "api_base": "http://upstream.test/v1",
                    "price": {"input_per_mtok": "0.1", "output_per_mtok": "0.5"},
                }
            ],
        }
    )
    app = create_app(settings, transport=httpx.MockTransport(echo))
    gateway: Gateway = app.state.gateway
    await gateway.start()
    await gateway.keys.create_team("gym")
    _, secret = await gateway.keys.create_key("gym")
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw.test")
    yield openai.AsyncOpenAI(base_url="http://gw.test/v1", api_key=secret, http_client=http, max_retries=0)
    await http.aclose()
    await gateway.stop()


async def ask(client: openai.AsyncOpenAI, question: str) -> tuple[str, str]:
    raw = await client.chat.completions.with_raw_response.create(
        model="m", messages=[{"role": "user", "content": question}]
    )
    return raw.headers["x-costgate-cache"], raw.parse().choices[0].message.content or ""


async def test_after_a_workout_is_not_served_to_before_a_workout(client: openai.AsyncOpenAI) -> None:
    assert await ask(client, STORED) == ("miss", f"echo: {STORED}")
    # The cache does serve a rewording of the stored question (so a miss below is a refusal)...
    reworded = "What should I eat after workout to gain muscle mass?"
    assert await ask(client, reworded) == ("semantic", f"echo: {STORED}")
    # ...but not the opposite question, nor one that points at context it does not carry.
    for other in (
        "What should I eat before a workout to gain muscle mass?",
        "What should I eat after a workout to lose muscle mass?",
        "What should I eat after this workout to gain muscle mass?",
    ):
        assert await ask(client, other) == ("miss", f"echo: {other}")


async def test_a_reversed_route_is_not_served(client: openai.AsyncOpenAI) -> None:
    there = "What is the cheapest way to travel from Delhi to Mumbai by train?"
    back = "What is the cheapest way to travel from Mumbai to Delhi by train?"
    assert await ask(client, there) == ("miss", f"echo: {there}")
    assert await ask(client, back) == ("miss", f"echo: {back}")
