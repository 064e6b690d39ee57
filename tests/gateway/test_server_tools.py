"""A model's config may price its provider's web search (`server_tools`): a native call then keeps
the tool, its uses capped, the hold counting the cap and the charge the uses the answer reports.
The fakes report the searches as Anthropic and OpenAI do: `usage.server_tool_use` and
`web_search_call` output items; the expected costs come from the configured price."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import anthropic
import httpx
import orjson
import pytest

from gateway.config.models_config import ModelConfig
from gateway.upstream.server_tools import resolve
from policies.pricing import from_pico
from tests.gateway.in_process import (
    anthropic_client,
    ledger_rows,
    message_answer,
    new_key,
    openai_client,
    running_app,
    settings_for,
    team_budget,
)

SEARCH = {"web_search": {"per_call_usd": "0.01", "max_calls": 3}}
PRICE = {"input_per_mtok": "1", "output_per_mtok": "2"}
NATIVE = {"provider": "openai", "price": PRICE, "max_retries": 0, "server_tools": SEARCH}
CLAUDE = NATIVE | {
    "name": "claude",
    "model": "claude-haiku-5-5",
    "api_base": "http://anthropic.test/v1",
    "apis": ["chat", "messages"],
}
GPT = NATIVE | {"name": "gpt", "model": "gpt-5", "api_base": "http://openai.test/v1", "apis": ["chat", "responses"]}
BASH = {"name": "Bash", "input_schema": {"type": "object"}}
TOKENS = Decimal(1000 * 1 + 100 * 2) / 1_000_000  # 1,000 prompt and 100 output tokens at $1 / $2


class Provider:
    """Answers as Anthropic and OpenAI do, after `searches` web searches; records what it was sent."""

    def __init__(self, searches: int) -> None:
        self.searches = searches
        self.sent: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = orjson.loads(request.content)
        self.sent.append(body)
        if request.url.path.endswith("/messages"):
            usage = {
                "input_tokens": 1000,
                "output_tokens": 100,
                "server_tool_use": {"web_search_requests": self.searches},
            }
            return httpx.Response(200, json=message_answer(usage, [{"type": "text", "text": "found it"}]))
        searches = [
            {"type": "web_search_call", "id": f"ws_{i}", "status": "completed", "action": {"type": "search"}}
            for i in range(self.searches)
        ]
        message = {
            "type": "message",
            "id": "msg_1",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "found it", "annotations": []}],
        }
        response = {
            "id": "resp_1",
            "object": "response",
            "created_at": 0,
            "status": "completed",
            "model": "gpt-5",
            "output": [*searches, message],
            "usage": {"input_tokens": 1000, "output_tokens": 100, "total_tokens": 1100},
        }
        if not body.get("stream"):
            return httpx.Response(200, json=response)
        events = [
            {"type": "response.created", "sequence_number": 0, "response": response | {"output": [], "usage": None}}
        ]
        for i, item in enumerate(searches):
            events.append(
                {"type": "response.output_item.added", "sequence_number": 2 * i + 1, "output_index": i, "item": item}
            )
            events.append(
                {"type": "response.output_item.done", "sequence_number": 2 * i + 2, "output_index": i, "item": item}
            )
        events.append({"type": "response.completed", "sequence_number": 99, "response": response})
        text = "".join(f"event: {e['type']}\ndata: {orjson.dumps(e).decode()}\n\n" for e in events)
        return httpx.Response(200, text=text, headers={"content-type": "text/event-stream"})


async def test_a_priced_web_search_reaches_anthropic_capped_and_is_charged(tmp_path: Path) -> None:
    provider = Provider(searches=2)
    async with running_app(settings_for(tmp_path, [CLAUDE]), httpx.MockTransport(provider)) as app:
        client = anthropic_client(app, await new_key(app))
        response = await client.messages.with_raw_response.create(
            model="claude",
            max_tokens=100,
            messages=[{"role": "user", "content": "what happened today?"}],
            tools=[BASH, {"type": "web_search_20250305", "name": "web_search", "max_uses": 8}],
        )
        (row,) = await ledger_rows(app)
    assert provider.sent[0]["tools"] == [BASH, {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}]
    assert "x-costgate-dropped-params" not in response.headers
    assert Decimal(response.headers["x-costgate-cost-usd"]) == TOKENS + 2 * Decimal("0.01")
    assert from_pico(row["cost_pusd"]) == TOKENS + 2 * Decimal("0.01")


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_a_priced_web_search_reaches_openai_capped_and_is_charged(tmp_path: Path, stream: bool) -> None:
    provider = Provider(searches=2)
    async with running_app(settings_for(tmp_path, [GPT]), httpx.MockTransport(provider)) as app:
        client = openai_client(app, await new_key(app))
        tools: Any = [{"type": "web_search"}]
        if stream:
            async with client.responses.stream(model="gpt", input="what happened today?", tools=tools) as events:
                async for _ in events:
                    pass
        else:
            await client.responses.create(model="gpt", input="what happened today?", tools=tools)
        (row,) = await ledger_rows(app)
    assert provider.sent[0]["tools"] == [{"type": "web_search"}] and provider.sent[0]["max_tool_calls"] == 3
    assert from_pico(row["cost_pusd"]) == TOKENS + 2 * Decimal("0.01")


async def test_the_hold_counts_the_searches_cap(tmp_path: Path) -> None:
    """A team with $0.02 left: the tokens' worst case (~$0.0003) fits, with 3 searches at $0.01 it
    does not. Refused before the provider is asked; without the tool, served."""
    provider = Provider(searches=0)
    async with running_app(settings_for(tmp_path, [CLAUDE]), httpx.MockTransport(provider)) as app:
        key = await new_key(app, team="searchers")
        await team_budget(app, "searchers", "0.02")
        client = anthropic_client(app, key)
        hi = [{"role": "user", "content": "hi"}]
        with pytest.raises(Exception) as refused:
            await client.messages.create(
                model="claude",
                max_tokens=100,
                messages=hi,
                tools=[{"type": "web_search_20250305", "name": "web_search"}],
            )
        assert getattr(refused.value, "status_code", None) in (402, 429), refused.value
        assert provider.sent == []
        await client.messages.create(model="claude", max_tokens=100, messages=hi)
    assert len(provider.sent) == 1


def test_the_price_of_a_search_comes_from_the_map_or_the_config() -> None:
    haiku = ModelConfig.model_validate({"name": "h", "model": "claude-haiku-5-5", "server_tools": {"web_search": {}}})
    assert resolve(haiku, Decimal("0.01"))["web_search"].per_call == Decimal("0.01")
    unknown = ModelConfig.model_validate({"name": "x", "model": "my-model", "server_tools": {"web_search": {}}})
    with pytest.raises(ValueError, match="per_call_usd"):
        resolve(unknown, None)


def test_a_messages_stream_that_breaks_off_is_charged_the_searches_it_began() -> None:
    from gateway.upstream.server_tools import ServerTool, Uses

    uses = Uses("messages")
    for i in range(2):
        uses.feed(
            {
                "type": "content_block_start",
                "index": i,
                "content_block": {"type": "server_tool_use", "id": f"srvtoolu_{i}", "name": "web_search", "input": {}},
            }
        )
    assert uses.fee({"web_search": ServerTool(Decimal("0.01"), 5)}) == Decimal("0.02")  # no usage ever came
    uses.feed({"type": "message_delta", "usage": {"output_tokens": 9, "server_tool_use": {"web_search_requests": 3}}})
    assert uses.counts == {"web_search": 3}


async def test_an_answer_the_gateway_cannot_read_is_charged_the_searches_cap(tmp_path: Path) -> None:
    """A 2xx the gateway cannot read was billed all the same, searches included: charged its worst
    case, the searches at their cap with it, never $0 for them."""
    unreadable = httpx.MockTransport(lambda _r: httpx.Response(200, text="<html>oops</html>"))
    async with running_app(settings_for(tmp_path, [CLAUDE]), unreadable) as app:
        client = anthropic_client(app, await new_key(app))
        with pytest.raises(anthropic.APIStatusError):
            await client.messages.create(
                model="claude",
                max_tokens=100,
                messages=[{"role": "user", "content": "hi"}],
                tools=[{"type": "web_search_20250305", "name": "web_search"}],
            )
        (row,) = await ledger_rows(app)
    assert from_pico(row["cost_pusd"]) > 3 * Decimal("0.01")
