"""Prompt caching placed by the gateway (issue 26): an agent-style replay through the gateway to
an Anthropic-style provider that caches prefixes at breakpoints and bills as Anthropic does
(tests/fakes/fake_anthropic_cache.py), with no markers from the client.

Runs the replay (12 conversations of 8 turns by default: a long system prompt, six tools, each
turn a tool call and its result, the whole history resent) through /v1/messages (native) and
through Chat Completions (litellm's Anthropic provider, over HTTP), each twice in the same run:
with the gateway's markers off (the baseline: what clients got before) and on. Prints what the
provider billed for input as a share of the uncached input price, and the ledger against the
provider's bill.

    LITELLM_LOCAL_MODEL_COST_MAP=True .venv/bin/python -m bench.prompt_cache_replay
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from decimal import Decimal
from pathlib import Path
from typing import Any

import anthropic
import httpx
import httpx2
import openai

from gateway.app import create_app
from gateway.config.settings import Settings
from gateway.service import Gateway
from tests.fakes.agent_replay import Agent, chat_request, conversations, messages_request
from tests.fakes.fake_anthropic_cache import AnthropicCacheFake
from tests.support import ThreadServer


def settings(work: Path, fake: AnthropicCacheFake, api_base: str, mode: str) -> Settings:
    common = {"price": fake.rates.price_config(), "api_key": "sk-ant-bench", "prompt_cache": {"mode": mode}}
    return Settings.model_validate(
        {
            "admin_key": "sk-cg-admin-bench-replay",
            "database_url": f"sqlite:///{work}/db.sqlite",
            "data_dir": str(work / "data"),
            "cache": {"exact": {"enabled": False}, "semantic": {"enabled": False}},
            "models": [
                fake.deployment(**common),
                {
                    "name": "claude-chat",
                    "provider": "litellm",
                    "model": "anthropic/claude-sonnet-4-5",
                    "api_base": api_base,
                    **common,
                },
            ],
        }
    )


async def replay(api: str, mode: str, count: int, turns: int) -> tuple[Decimal, Decimal, Decimal]:
    """(provider's input bill / uncached input price, ledger $, provider's bill $)."""
    fake = AnthropicCacheFake(min_tokens=1024)
    server = ThreadServer(fake.app)
    agent = Agent.make()
    with tempfile.TemporaryDirectory() as tmp:
        app = create_app(settings(Path(tmp), fake, server.base, mode), transport=httpx.ASGITransport(app=fake.app))
        gateway: Gateway = app.state.gateway
        await gateway.start()
        try:
            await gateway.keys.create_team("agents")
            _, key = await gateway.keys.create_key("agents")
            charged = await _send(app, key, api, agent, count, turns)
        finally:
            await gateway.stop()
    server.stop()
    return fake.bill.input_share(), charged, fake.bill.total()


async def _send(app: Any, key: str, api: str, agent: Agent, count: int, turns: int) -> Decimal:
    charged = Decimal(0)
    if api == "messages":
        http2 = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://gw.test")
        claude = anthropic.AsyncAnthropic(base_url="http://gw.test", api_key=key, http_client=http2, max_retries=0)
    else:
        http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw.test")
        gpt = openai.AsyncOpenAI(base_url="http://gw.test/v1", api_key=key, http_client=http, max_retries=0)
    for convo in conversations(count, turns):
        for t, turn in enumerate(convo):
            if api == "messages":
                body = messages_request(agent, convo[:t], turn)
                raw: Any = await claude.messages.with_raw_response.create(model="claude", **body)
            else:
                body = chat_request(agent, convo[:t], turn)
                raw = await gpt.chat.completions.with_raw_response.create(model="claude-chat", **body)
            charged += Decimal(raw.headers["x-costgate-cost-usd"])
    return charged


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--conversations", type=int, default=12)
    parser.add_argument("--turns", type=int, default=8)
    args = parser.parse_args()
    print(f"agent replay: {args.conversations} conversations x {args.turns} turns, no client markers")
    print(
        f"{'API':<10} {'markers':<8} {'input billed / uncached':>24} {'ledger $':>12} {'provider $':>12} {'diff $':>8}"
    )
    for api in ("messages", "chat"):
        for mode in ("off", "auto"):
            share, ledger, bill = await replay(api, mode, args.conversations, args.turns)
            diff = format(ledger - bill, "f")
            print(f"{api:<10} {mode:<8} {float(share):>23.1%} {ledger:>12.6f} {bill:>12.6f} {diff:>8}")


if __name__ == "__main__":
    asyncio.run(main())
