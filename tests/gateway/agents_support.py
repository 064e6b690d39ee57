"""What the coding-agent tests share (issue 29): the fake provider on a local thread server
(tests/fakes/fake_agents.py), a gateway built in-process over it, and the request bodies the
pinned CLIs sent (tests/fixtures/agents, captured from Claude Code 2.1.332 and Codex 0.171.0
talking to the fake directly)."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from gateway.app import create_app
from gateway.config.settings import Settings
from gateway.service import Gateway
from tests.fakes.fake_agents import PRICES, AgentFake, create_agent_fake

FIXTURES = Path(__file__).parent.parent / "fixtures" / "agents"
ADMIN = "sk-cg-admin-agents-test"
# The gateway prices every model as the fake bills (PRICES).
PRICE = {
    "input_per_mtok": str(PRICES["in"]),
    "output_per_mtok": str(PRICES["out"]),
    "cached_input_per_mtok": str(PRICES["read"]),
    "cache_write_per_mtok": str(PRICES["write"]),
}


def fixture(name: str) -> dict[str, Any]:
    """One captured request: {"path", "headers", "body", "captured"}."""
    return json.loads((FIXTURES / f"{name}.json").read_text())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def fake_provider() -> Iterator[tuple[str, AgentFake]]:
    """The fake on a real local port (litellm makes its own connections): its URL and state."""
    fake = AgentFake()
    port = _free_port()
    server = uvicorn.Server(
        uvicorn.Config(create_agent_fake(fake), host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(500):
        if server.started:
            break
        threading.Event().wait(0.01)
    try:
        yield f"http://127.0.0.1:{port}", fake
    finally:
        server.should_exit = True
        thread.join(5)


def models(url: str) -> list[dict[str, Any]]:
    """The three ways an agent's request reaches a model."""
    return [
        # Claude Code's model names, as Anthropic's own API through litellm (native by default)
        {
            "name": "claude-opus-5-5",
            "provider": "litellm",
            "model": "anthropic/claude-opus-5-5",
            "api_base": url,
            "api_key": "sk-ant-provider-key",
            "price": PRICE,
        },
        # an upstream that serves the Messages API itself
        {
            "name": "native-claude",
            "provider": "openai",
            "model": "claude-native",
            "api_base": f"{url}/v1",
            "api_key": "sk-ant-provider-key",
            "apis": ["chat", "messages"],
            "price": PRICE,
        },
        # Codex's model through a Chat Completions upstream (translated), and a native Responses one
        {
            "name": "gpt-5.5-codex",
            "provider": "openai",
            "model": "chat-model",
            "api_base": f"{url}/v1",
            "api_key": "sk-openai-provider-key",
            "price": PRICE,
        },
        {
            "name": "native-codex",
            "provider": "openai",
            "model": "responses-model",
            "api_base": f"{url}/v1",
            "api_key": "sk-openai-provider-key",
            "apis": ["chat", "responses"],
            "price": PRICE,
        },
        # Claude Code's Messages through a Chat Completions upstream (translated)
        {
            "name": "chat-claude",
            "provider": "openai",
            "model": "chat-model",
            "api_base": f"{url}/v1",
            "api_key": "sk-openai-provider-key",
            "price": PRICE,
        },
    ]


def settings(url: str, work: Path, **extra: Any) -> Settings:
    return Settings.model_validate(
        {
            "admin_key": ADMIN,
            "database_url": f"sqlite:///{work}/db.sqlite",
            "data_dir": str(work / "data"),
            "models": models(url),
            **extra,
        }
    )


class InProcessGateway:
    """A gateway app over the fake, driven through httpx's ASGI transport."""

    def __init__(self, url: str, work: Path) -> None:
        self.app = create_app(settings(url, work))
        self.gateway: Gateway = self.app.state.gateway
        self.http = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=self.app), base_url="http://gw.test", timeout=60
        )

    async def start(self) -> str:
        await self.gateway.start()
        await self.gateway.keys.create_team("agents")
        _, secret = await self.gateway.keys.create_key("agents")
        return str(secret)

    async def stop(self) -> None:
        await self.http.aclose()
        await self.gateway.stop()

    async def spend_usd(self) -> str:
        await self.gateway.ledger.flush()
        response = await self.http.get("/admin/spend?group_by=team", headers={"authorization": f"Bearer {ADMIN}"})
        return str(response.json()["total_usd"])
