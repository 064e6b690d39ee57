"""A gateway in this process, for the tests of what surrounds an answer (ids, limits, errors,
logs, traces): the official openai and anthropic SDKs talk to the app over httpx's ASGI
transport; upstreams are `httpx.MockTransport` handlers that speak OpenAI's API, or real local
servers where the path under test owns its network (aiohttp, litellm)."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anthropic
import httpx
import httpx2
import openai
import orjson

from gateway.app import create_app
from gateway.config.settings import Settings
from gateway.service import Gateway

ADMIN_KEY = "sk-cg-admin-in-process"
PRICE = {"input_per_mtok": "1", "output_per_mtok": "2"}


def chat_answer(text: str = "ok", model: str = "upstream-model", prompt: int = 5, completion: int = 2) -> dict:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
    }


def message_answer(
    usage: dict, content: list[dict] | None = None, model: str = "claude-haiku-5-5", stop: str = "end_turn"
) -> dict:
    """An Anthropic Messages answer: `content` (one text block by default) and `usage` as given."""
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content if content is not None else [{"type": "text", "text": "done"}],
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage,
    }


def settings_for(work: Path, models: list[dict[str, Any]], **extra: Any) -> Settings:
    return Settings.model_validate(
        {
            "admin_key": ADMIN_KEY,
            "database_url": f"sqlite:///{work}/db.sqlite",
            "data_dir": str(work / "data"),
            "cache": {"exact": {"enabled": False}},  # every request reaches its upstream
            "models": models,
            **extra,
        }
    )


def openai_model(name: str, api_base: str = "http://upstream.test/v1", **fields: Any) -> dict[str, Any]:
    return {"name": name, "provider": "openai", "api_base": api_base, "price": PRICE, "max_retries": 0, **fields}


@asynccontextmanager
async def running_app(settings: Settings, transport: httpx.AsyncBaseTransport | None = None) -> AsyncIterator[Any]:
    app = create_app(settings, transport=transport)
    gateway: Gateway = app.state.gateway
    await gateway.start()
    try:
        yield app
    finally:
        await gateway.stop()


async def new_key(app: Any, team: str = "team-a", **fields: Any) -> str:
    gateway: Gateway = app.state.gateway
    if team not in [t.name for t in await gateway.keys.list_teams()]:
        await gateway.keys.create_team(team)
    _, secret = await gateway.keys.create_key(team, **fields)
    return secret


async def team_budget(app: Any, team: str, amount_usd: str, period: str = "monthly") -> None:
    """A budget on `team`, through the admin API."""
    async with http_client(app) as admin:
        budget = {"scope": "team", "id": team, "amount_usd": amount_usd, "period": period}
        put = await admin.put("/admin/budgets", json=budget, headers={"authorization": f"Bearer {ADMIN_KEY}"})
        assert put.status_code in (200, 201), put.text


def http_client(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw.test")


def openai_client(app: Any, key: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url="http://gw.test/v1", api_key=key, http_client=http_client(app), max_retries=0)


def anthropic_client(app: Any, key: str) -> anthropic.AsyncAnthropic:
    http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://gw.test")
    return anthropic.AsyncAnthropic(base_url="http://gw.test", api_key=key, http_client=http, max_retries=0)


async def ledger_rows(app: Any) -> list[dict[str, Any]]:
    from sqlalchemy import select

    from gateway.storage.db import ledger

    gateway: Gateway = app.state.gateway
    await gateway.ledger.flush()
    async with gateway.db.connect() as conn:
        return [dict(r._mapping) for r in await conn.execute(select(ledger))]


Reply = tuple[int, dict[str, str], bytes]


class LocalUpstream:
    """A real HTTP server on 127.0.0.1 in a thread, answering each POST with `reply(path, body,
    headers)`: for the paths that own their network (aiohttp's whole answers, litellm)."""

    def __init__(self, reply: Callable[[str, dict[str, Any], dict[str, str]], Reply]) -> None:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = orjson.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
                headers = {k.lower(): v for k, v in self.headers.items()}
                outer.seen.append((self.path, body, headers))
                status, extra, raw = reply(self.path, body, headers)
                self.send_response(status)
                for name, value in {"content-type": "application/json", **extra}.items():
                    self.send_header(name, value)
                self.send_header("content-length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args: Any) -> None:
                return None

        self.seen: list[tuple[str, dict[str, Any], dict[str, str]]] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
