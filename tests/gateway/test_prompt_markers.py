"""Prompt caching placed by the gateway (issue 26), in process: the official SDKs talk to the
gateway over ASGI; behind it an Anthropic-compatible provider that caches prefixes at
breakpoints and bills reads, writes and plain input as Anthropic does
(tests/fakes/fake_anthropic_cache.py) — reached natively over an ASGI transport, and through
litellm over HTTP (a local server thread) for Chat Completions. The client sets no markers."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from gateway.config.settings import Settings
from tests.fakes.agent_replay import Agent, chat_request, conversations, messages_request
from tests.fakes.fake_anthropic_cache import AnthropicCacheFake
from tests.gateway import in_process
from tests.gateway.in_process import anthropic_client, new_key, openai_client, running_app
from tests.support import ThreadServer

ADMIN = "sk-cg-admin-prompt-markers"
AGENT = Agent.make()
NO_CACHE = {"exact": {"enabled": False}, "semantic": {"enabled": False}}


@pytest.fixture(scope="module")
def fake_server() -> Iterator[tuple[AnthropicCacheFake, str]]:
    """The provider over HTTP, for litellm (which makes its own connections)."""
    fake = AnthropicCacheFake(min_tokens=1024)
    server = ThreadServer(fake.app)
    yield fake, server.base
    server.stop()


def settings_for(tmp: Path, fake: AnthropicCacheFake, api_base: str, **extra: Any) -> Settings:
    price = fake.rates.price_config()
    models = [
        fake.deployment(),  # served natively: /v1/messages goes through as the client wrote it
        {  # Chat Completions through litellm's Anthropic provider
            "name": "claude-chat",
            "provider": "litellm",
            "model": "anthropic/claude-sonnet-4-5",
            "api_base": api_base,
            "api_key": "sk-ant-upstream",
            "price": price,
        },
    ]
    return in_process.settings_for(tmp, models, **({"admin_key": ADMIN, "cache": NO_CACHE} | extra))


@pytest.fixture
async def app(
    tmp_path: Path, fake_server: tuple[AnthropicCacheFake, str], request: pytest.FixtureRequest
) -> AsyncIterator[Any]:
    fake, api_base = fake_server
    fake.bill.__init__()  # type: ignore[misc]  # a fresh bill and cache for each test
    fake._cache.clear()
    extra = getattr(request, "param", {})
    async with running_app(settings_for(tmp_path, fake, api_base, **extra), httpx.ASGITransport(app=fake.app)) as app:
        yield app


async def replay_messages(app: Any, key: str, count: int = 3, turns: int = 4) -> Decimal:
    client, charged = anthropic_client(app, key), Decimal(0)
    for turns_of in conversations(count, turns):
        for t, turn in enumerate(turns_of):
            body = messages_request(AGENT, turns_of[:t], turn)
            raw = await client.messages.with_raw_response.create(model="claude", **body)
            charged += Decimal(raw.headers["x-costgate-cost-usd"])
    return charged


async def replay_chat(app: Any, key: str, count: int = 3, turns: int = 4) -> Decimal:
    client, charged = openai_client(app, key), Decimal(0)
    for turns_of in conversations(count, turns):
        for t, turn in enumerate(turns_of):
            body = chat_request(AGENT, turns_of[:t], turn)
            raw = await client.chat.completions.with_raw_response.create(model="claude-chat", **body)
            charged += Decimal(raw.headers["x-costgate-cost-usd"])
    return charged


@pytest.mark.parametrize("replay", [replay_messages, replay_chat], ids=["messages", "chat"])
async def test_agent_replay_is_billed_a_fraction_and_charged_the_bill(app: Any, replay: Any, fake_server: Any) -> None:
    fake, _ = fake_server
    charged = await replay(app, await new_key(app, "agents"))
    marks = [sum(_marks(r["body"])) for r in fake.bill.requests]
    assert all(1 <= m <= 4 for m in marks)  # the client sent none; the gateway placed them, within the limit
    assert fake.bill.input_share() <= Decimal("0.30")  # the provider billed under 30% of uncached input
    assert charged == fake.bill.total()  # and the ledger says what it billed, to the pico-dollar


async def test_a_clients_breakpoints_stay_and_none_are_added_past_four(app: Any, fake_server: Any) -> None:
    fake, _ = fake_server
    client = anthropic_client(app, await new_key(app, "marks"))
    mark = {"type": "ephemeral"}
    tools = [
        {"name": t["name"], "description": t["description"], "input_schema": t["schema"], "cache_control": mark}
        for t in AGENT.tools[:4]
    ]
    await client.messages.create(
        model="claude", max_tokens=10, system=AGENT.system, tools=tools, messages=[{"role": "user", "content": "hi"}]
    )
    sent = fake.bill.requests[-1]["body"]
    assert [t.get("cache_control") for t in sent["tools"]] == [mark] * 4  # where the client put them
    assert sum(_marks(sent)) == 4  # and no fifth: the provider would refuse it


async def test_a_short_prompt_gets_no_breakpoint(app: Any, fake_server: Any) -> None:
    fake, _ = fake_server
    client = anthropic_client(app, await new_key(app, "short"))
    await client.messages.create(model="claude", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
    assert sum(_marks(fake.bill.requests[-1]["body"])) == 0


@pytest.mark.parametrize(
    "app, reads",
    [({}, False), ({"prompt_cache": {"share_across_teams": True}}, True)],
    indirect=["app"],
    ids=["isolated", "shared"],
)
async def test_teams_share_provider_cache_entries_only_when_set(app: Any, reads: bool, fake_server: Any) -> None:
    fake, _ = fake_server
    body = messages_request(AGENT, [], next(conversations(1, 1))[0])
    for team in ("team-one", "team-two"):
        await anthropic_client(app, await new_key(app, team)).messages.create(model="claude", **body)
    second = fake.bill.requests[-1]["usage"]
    assert (second["cache_read_input_tokens"] > 0) is reads


@pytest.mark.parametrize(
    "app",
    [{"teams": {"quiet": {"prompt_cache": {"mode": "off"}}, "hourly": {"prompt_cache": {"ttl": "1h"}}}}],
    indirect=True,
)
async def test_per_team_off_and_ttl(app: Any, fake_server: Any) -> None:
    fake, _ = fake_server
    body = messages_request(AGENT, [], next(conversations(1, 1))[0])
    await anthropic_client(app, await new_key(app, "quiet")).messages.create(model="claude", **body)
    assert sum(_marks(fake.bill.requests[-1]["body"])) == 0
    await anthropic_client(app, await new_key(app, "hourly")).messages.create(model="claude", **body)
    usage = fake.bill.requests[-1]["usage"]
    assert (
        usage["cache_creation"]["ephemeral_1h_input_tokens"] > 0
        and usage["cache_creation"]["ephemeral_5m_input_tokens"] == 0
    )


def _marks(body: dict[str, Any]) -> Iterator[int]:
    """1 for each block of an Anthropic body that carries a breakpoint."""
    system = body.get("system")
    for item in [*(body.get("tools") or ()), *([] if isinstance(system, str) else system or ())]:
        yield int("cache_control" in item)
    for message in body.get("messages") or ():
        content = message.get("content")
        for block in [] if isinstance(content, str) else content or ():
            yield int("cache_control" in block)


async def test_openai_gets_a_prompt_cache_key_per_team_unless_the_client_set_one(tmp_path: Path) -> None:
    sent: list[dict[str, Any]] = []

    def upstream(request: httpx.Request) -> httpx.Response:
        sent.append(orjson.loads(request.content))
        answer = {"role": "assistant", "content": "ok"}
        return httpx.Response(
            200,
            json={
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": "gpt-4o-mini",
                "choices": [{"index": 0, "message": answer, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
            },
        )

    gpt = {"name": "gpt", "model": "gpt-4o-mini", "api_base": "https://api.openai.com/v1", "api_key": "k"}
    settings = in_process.settings_for(tmp_path, [gpt], admin_key=ADMIN, cache=NO_CACHE)
    async with running_app(settings, httpx.MockTransport(upstream)) as application:
        messages = [{"role": "system", "content": AGENT.system}, {"role": "user", "content": "hi"}]
        for team in ("key-one", "key-two"):
            client = openai_client(application, await new_key(application, team))
            await client.chat.completions.create(model="gpt", messages=messages)  # type: ignore[arg-type]
            await client.chat.completions.create(
                model="gpt", messages=messages[:1] + [{"role": "user", "content": "?"}]
            )  # type: ignore[arg-type, list-item]
        await client.chat.completions.create(model="gpt", messages=messages, extra_body={"prompt_cache_key": "mine"})  # type: ignore[arg-type]
    keys = [body.get("prompt_cache_key") for body in sent]
    assert keys[0] == keys[1] and keys[2] == keys[3]  # one key a team and stable prefix...
    assert keys[0] != keys[2] and keys[0].startswith("cg-")  # ...another team's is its own
    assert keys[4] == "mine"  # the client's own is kept


async def test_a_streamed_chat_replay_is_charged_the_bill(app: Any, fake_server: Any) -> None:
    fake, _ = fake_server
    client = openai_client(app, await new_key(app, "streams"))
    for turns_of in conversations(1, 3):
        for t, turn in enumerate(turns_of):
            stream = await client.chat.completions.create(
                model="claude-chat",
                stream=True,
                stream_options={"include_usage": True},
                **chat_request(AGENT, turns_of[:t], turn),
            )
            async for _ in stream:
                pass
    assert fake.bill.requests[-1]["usage"]["cache_read_input_tokens"] > 0
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw.test") as http:
        rows = (await http.get("/admin/spend?group_by=model", headers={"authorization": f"Bearer {ADMIN}"})).json()
    charged = next(Decimal(r["cost_usd"]) for r in rows["rows"] if r["group"] == "claude-chat")
    assert charged == fake.bill.total()
