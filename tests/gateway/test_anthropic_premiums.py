"""Anthropic bills US-only inference at 1.1x on its models since February 2026 and fast mode at a
multiple (claude-opus-5-5: 2x in litellm's map), and serves a workspace's `default_inference_geo`
when the request names none; its answer's usage says which (`inference_geo`, `speed`). The ledger
charged list price: 10% under the bill for every call of a US-only workspace. Now each call is
charged at the premium its answer names (native Messages, whole and streamed, and a chat answer
whose usage carries them, as litellm's does), the premium is no saving, and a call is held at the
dearest region unless the request pins one (where the config forwards `inference_geo`)."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from policies.pricing import from_pico
from tests.gateway.in_process import (
    anthropic_client,
    chat_answer,
    http_client,
    ledger_rows,
    message_answer,
    new_key,
    openai_client,
    running_app,
    settings_for,
    team_budget,
)

# claude-opus-5-5 at litellm's map's prices ($4 / $20 per million), served natively and as chat
OPUS = {
    "name": "opus",
    "provider": "openai",
    "model": "claude-opus-5-5",
    "api_base": "http://upstream.test/v1",
    "apis": ["chat", "messages"],
    "max_retries": 0,
}
LIST = (Decimal(1000) * 4 + Decimal(200) * 20) / 1_000_000  # 1,000 prompt and 200 output tokens: $0.008


def upstream(usage_extra: dict[str, Any], asked: list[dict[str, Any]] | None = None) -> httpx.MockTransport:
    """A provider whose answers report 1,000 prompt and 200 output tokens and `usage_extra`."""

    def answer(request: httpx.Request) -> httpx.Response:
        body = orjson.loads(request.content)
        if asked is not None:
            asked.append(body)
        if request.url.path.endswith("/messages"):
            if not body.get("stream"):
                return httpx.Response(
                    200, json=message_answer({"input_tokens": 1000, "output_tokens": 200} | usage_extra)
                )
            return httpx.Response(200, text=message_stream(usage_extra), headers={"content-type": "text/event-stream"})
        chat = chat_answer(prompt=1000, completion=200)
        chat["usage"] |= usage_extra  # as litellm's chat answer carries Anthropic's fields
        return httpx.Response(200, json=chat)

    return httpx.MockTransport(answer)


def message_stream(usage_extra: dict[str, Any]) -> str:
    """A Messages stream: the region and speed ride on message_start's usage, as Anthropic sends it."""
    start = message_answer({"input_tokens": 1000, "output_tokens": 1} | usage_extra, content=[])
    ending = {"stop_reason": "end_turn", "stop_sequence": None}
    events = [
        {"type": "message_start", "message": start | {"stop_reason": None}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "done"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": ending, "usage": {"output_tokens": 200}},
        {"type": "message_stop"},
    ]  # fmt: skip
    return "".join(f"event: {e['type']}\ndata: {orjson.dumps(e).decode()}\n\n" for e in events)


@pytest.mark.parametrize(
    "named, factor",
    [
        ({"inference_geo": "us"}, Decimal("1.1")),
        ({"inference_geo": "us", "speed": "fast"}, Decimal("2.2")),
        ({"inference_geo": "global", "speed": "standard"}, Decimal(1)),
        ({}, Decimal(1)),  # an answer that names neither: list price, as litellm prices it
    ],
)
async def test_each_call_is_charged_at_the_premium_its_answer_names(
    tmp_path: Path, named: dict[str, Any], factor: Decimal
) -> None:
    async with running_app(settings_for(tmp_path, [OPUS]), upstream(named)) as app:
        key = await new_key(app)
        claude = anthropic_client(app, key)
        whole = await claude.messages.with_raw_response.create(
            model="opus", max_tokens=300, messages=[{"role": "user", "content": "hi"}]
        )
        async with claude.messages.stream(
            model="opus", max_tokens=300, messages=[{"role": "user", "content": "hi"}]
        ) as stream:
            async for _ in stream:
                pass
        chat = await openai_client(app, key).chat.completions.with_raw_response.create(
            model="opus", messages=[{"role": "user", "content": "hi"}]
        )
        rows = await ledger_rows(app)
        async with http_client(app) as http:
            metrics = (await http.get("/metrics")).text
    expected = LIST * factor
    assert Decimal(whole.headers["x-costgate-cost-usd"]) == expected
    assert Decimal(chat.headers["x-costgate-cost-usd"]) == expected
    assert sorted(from_pico(r["cost_pusd"]) for r in rows) == [expected] * 3
    premium = 'costgate_provider_tier_premium_usd_total{model="opus",team="team-a"}'
    assert (premium in metrics) == (factor != 1)  # the premium is no saving


async def test_a_call_is_held_at_the_dearest_region_unless_the_request_pins_one(tmp_path: Path) -> None:
    """A ~1,000-token prompt and max_tokens 1,000 are held at $0.06146 at list price (the prompt
    as its UTF-8 bytes: Claude's tokenizer is not tiktoken) and fit a $0.065 budget; at US-only's
    1.1x ($0.0676) they do not, so the request is refused before the provider is asked. Pinned
    to `global` (forwarded), it is held at list."""
    asked: list[dict[str, Any]] = []
    forwards = OPUS | {"extra_params": ["inference_geo"]}
    async with running_app(settings_for(tmp_path, [forwards]), upstream({"inference_geo": "global"}, asked)) as app:
        key = await new_key(app, team="geo")
        await team_budget(app, "geo", "0.065")
        client = openai_client(app, key)
        prompt = "word " * 990
        with pytest.raises(Exception) as refused:
            await client.chat.completions.create(
                model="opus", messages=[{"role": "user", "content": prompt}], max_tokens=1000
            )
        assert getattr(refused.value, "status_code", None) in (402, 429), refused.value
        assert asked == []
        pinned = await client.chat.completions.with_raw_response.create(
            model="opus",
            messages=[{"role": "user", "content": prompt}],
            max_tokens=1000,
            extra_body={"inference_geo": "global"},
        )
    assert pinned.http_response.status_code == 200
    assert len(asked) == 1 and asked[0]["inference_geo"] == "global"


@pytest.mark.parametrize("named, factor", [({"inference_geo": "us"}, Decimal("1.1")), ({}, Decimal(1))])
async def test_a_cascade_tiers_call_is_charged_at_its_premium_too(
    tmp_path: Path, named: dict[str, Any], factor: Decimal
) -> None:
    """A cascade's tiers are a policy's own calls (the guarded `Upstream.complete`), charged by
    the same rule as a direct answer."""
    haiku = OPUS | {"name": "haiku", "model": "claude-haiku-5-5", "apis": ["chat"]}  # $0.10 / $0.50 a million
    cascade = {"name": "auto", "tiers": ["haiku", "opus"], "adaptive": False, "thresholds": [0.0], "shadow_rate": 0.0}
    settings = settings_for(tmp_path, [haiku, OPUS], cascades=[cascade])
    async with running_app(settings, upstream(named)) as app:
        key = await new_key(app)
        answer = await openai_client(app, key).chat.completions.with_raw_response.create(
            model="auto", messages=[{"role": "user", "content": "What is 2 + 2?"}]
        )
    assert answer.headers["x-costgate-model"] == "haiku"
    assert Decimal(answer.headers["x-costgate-cost-usd"]) == Decimal("0.0002") * factor
