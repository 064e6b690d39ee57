"""OpenAI's priority tier is billed at its own rates (gpt-5: $2.50 / $20 per million against $1.25
/ $10), and OpenAI serves it whenever the project's default tier is priority, whatever the request
asked; the answer says `"service_tier": "priority"`. The ledger charged list price: half the bill.
Now every call is charged at the tier its answer names (chat, whole and streamed, and a native
Response), the premium is counted apart from savings, and a request that asks for priority (where
the config forwards `service_tier`) is held at it."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from policies.pricing import from_pico
from tests.gateway.in_process import (
    chat_answer,
    http_client,
    ledger_rows,
    new_key,
    openai_client,
    running_app,
    settings_for,
    team_budget,
)

GPT5 = {"name": "gpt-5", "provider": "openai", "api_base": "http://upstream.test/v1", "max_retries": 0}
NATIVE = GPT5 | {"name": "gpt-5-responses", "model": "gpt-5", "apis": ["chat", "responses"]}
# gpt-5's published rates per million tokens: (input, output) at list price and at priority
LIST, PRIORITY = (Decimal("1.25"), Decimal("10")), (Decimal("2.50"), Decimal("20"))


def cost(rates: tuple[Decimal, Decimal], prompt: int, completion: int) -> Decimal:
    return (prompt * rates[0] + completion * rates[1]) / 1_000_000


def upstream(tier: str) -> httpx.MockTransport:
    """A provider whose project serves every request at `tier`, as its answers say."""

    def answer(request: httpx.Request) -> httpx.Response:
        body = orjson.loads(request.content)
        if request.url.path.endswith("/responses"):
            return httpx.Response(200, json=response_object(tier))
        if not body.get("stream"):
            return httpx.Response(200, json=chat_answer(prompt=1000, completion=200) | {"service_tier": tier})
        chunks = [
            {"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": None}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
            {"choices": [], "usage": {"prompt_tokens": 1000, "completion_tokens": 200, "total_tokens": 1200}},
        ]
        base = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "gpt-5", "service_tier": tier}
        text = "".join(f"data: {orjson.dumps(base | c).decode()}\n\n" for c in chunks) + "data: [DONE]\n\n"
        return httpx.Response(200, text=text, headers={"content-type": "text/event-stream"})

    return httpx.MockTransport(answer)


def response_object(tier: str) -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 0,
        "status": "completed",
        "model": "gpt-5",
        "service_tier": tier,
        "output": [
            {
                "type": "message",
                "id": "msg_1",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "ok", "annotations": []}],
            }
        ],
        "usage": {"input_tokens": 1000, "output_tokens": 200, "total_tokens": 1200},
    }


# `fast` is what OpenAI has called priority since 2026-07-30: the same tier, the same rates
@pytest.mark.parametrize("tier, rates", [("priority", PRIORITY), ("fast", PRIORITY), ("default", LIST)])
async def test_each_call_is_charged_at_the_tier_its_answer_names(
    tmp_path: Path, tier: str, rates: tuple[Decimal, Decimal]
) -> None:
    async with running_app(settings_for(tmp_path, [GPT5, NATIVE]), upstream(tier)) as app:
        key = await new_key(app)
        client = openai_client(app, key)
        whole = await client.chat.completions.with_raw_response.create(
            model="gpt-5", messages=[{"role": "user", "content": "hi"}]
        )
        async for _ in await client.chat.completions.create(
            model="gpt-5", messages=[{"role": "user", "content": "hi"}], stream=True
        ):
            pass
        native = await client.responses.with_raw_response.create(model="gpt-5-responses", input="hi")
        rows = await ledger_rows(app)
        async with http_client(app) as http:
            metrics = (await http.get("/metrics")).text
    expected = cost(rates, 1000, 200)
    assert Decimal(whole.headers["x-costgate-cost-usd"]) == expected
    assert Decimal(native.headers["x-costgate-cost-usd"]) == expected
    assert sorted(from_pico(r["cost_pusd"]) for r in rows) == [expected] * 3
    assert {r["tier"] for r in rows} == {"standard" if tier == "default" else "priority"}
    premium = 'costgate_provider_tier_premium_usd_total{model="gpt-5",team="team-a"}'
    assert (premium in metrics) == (tier != "default")  # the premium is no saving


async def test_a_request_that_asks_for_priority_is_held_at_it(tmp_path: Path) -> None:
    """Held at list price, 1,000 prompt tokens and max_tokens 1,000 fit in $0.02 ($0.011); at
    priority ($0.022) they do not: refused before the provider is asked."""
    asked: list[httpx.Request] = []
    transport = upstream("priority")

    async def counted(request: httpx.Request) -> httpx.Response:
        asked.append(request)
        return await transport.handle_async_request(request)

    forwards = GPT5 | {"extra_params": ["service_tier"]}
    async with running_app(settings_for(tmp_path, [forwards]), httpx.MockTransport(counted)) as app:
        key = await new_key(app, team="prio")
        await team_budget(app, "prio", "0.02")
        client = openai_client(app, key)
        prompt = "word " * 990
        ok = await client.chat.completions.with_raw_response.create(
            model="gpt-5", messages=[{"role": "user", "content": prompt}], max_tokens=1000
        )
        assert ok.http_response.status_code == 200 and len(asked) == 1
        with pytest.raises(Exception) as refused:
            await client.chat.completions.create(
                model="gpt-5",
                messages=[{"role": "user", "content": prompt}],
                max_tokens=1000,
                service_tier="priority",
            )
    assert getattr(refused.value, "status_code", None) in (402, 429), refused.value
    assert len(asked) == 1
