"""A long prompt is billed at the provider's long-prompt rates (policies/pricing.py `LongContext`):
Anthropic's Haiku 5.5 over 100k prompt tokens (cache reads and writes counted), OpenAI's GPT-5.4
over 272k, Gemini 2.5 Pro over 200k, every token of the call at about 2x-5x the plain rates. The
ledger charged the plain rates, a fifth of what the provider bills for a long Claude Code turn, and
a hold at the plain rates did not bound the call. The fakes here report usage as the provider
does; the expected costs are computed from the providers' published rates, not read back from
the gateway's price table."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import httpx
import pytest

from policies.pricing import from_pico
from tests.gateway.in_process import (
    anthropic_client,
    chat_answer,
    ledger_rows,
    message_answer,
    new_key,
    openai_client,
    openai_model,
    running_app,
    settings_for,
    team_budget,
)

HAIKU = {  # an upstream that serves the Messages API; priced from litellm's map (no `price:`)
    "name": "haiku",
    "provider": "openai",
    "model": "claude-haiku-5-5",
    "api_base": "http://anthropic.test/v1",
    "apis": ["chat", "messages"],
    "max_retries": 0,
}
# Anthropic's list price of claude-haiku-5-5 per million tokens: input, output, cache read, 5-minute write
PLAIN = (Decimal("0.10"), Decimal("0.50"), Decimal("0.01"), Decimal("0.125"))
LONG = (Decimal("0.50"), Decimal("2.50"), Decimal("0.05"), Decimal("0.625"))  # over 100k prompt tokens


def message(input_tokens: int, cache_read: int, cache_write: int, output: int) -> httpx.MockTransport:
    usage = {
        "input_tokens": input_tokens,
        "cache_read_input_tokens": cache_read,
        "cache_creation_input_tokens": cache_write,
        "output_tokens": output,
    }

    def answer(_request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=message_answer(usage))

    return httpx.MockTransport(answer)


def billed(rates: tuple[Decimal, ...], input_tokens: int, cache_read: int, cache_write: int, output: int) -> Decimal:
    inp, out, read, write = rates
    return (input_tokens * inp + output * out + cache_read * read + cache_write * write) / 1_000_000


@pytest.mark.parametrize(
    "usage, rates",
    [
        ((20_000, 70_000, 9_000, 800), PLAIN),  # 99,000 prompt tokens: the plain rates
        ((20_000, 70_000, 11_000, 800), LONG),  # 101,000, cache reads and writes counted: every token long
    ],
)
async def test_a_long_claude_turn_is_charged_what_anthropic_bills(
    tmp_path: Path, usage: tuple[int, int, int, int], rates: tuple[Decimal, ...]
) -> None:
    async with running_app(settings_for(tmp_path, [HAIKU]), message(*usage)) as app:
        client = anthropic_client(app, await new_key(app))
        response = await client.messages.with_raw_response.create(
            model="haiku", max_tokens=1000, messages=[{"role": "user", "content": "go on"}]
        )
        (row,) = await ledger_rows(app)
    assert Decimal(response.headers["x-costgate-cost-usd"]) == billed(rates, *usage)
    assert from_pico(row["cost_pusd"]) == billed(rates, *usage)


LONG_PRICED = openai_model(  # a configured price with a long-prompt tier: 10x over 1,000 prompt tokens
    "long",
    model="gpt-4o-mini",
    price={
        "input_per_mtok": "1",
        "output_per_mtok": "2",
        "long_context": [{"above_tokens": 1000, "input_per_mtok": "10", "output_per_mtok": "20"}],
        "batch": {"input_per_mtok": "0.5", "output_per_mtok": "1"},
    },
)


async def test_a_configured_long_prompt_price_is_charged(tmp_path: Path) -> None:
    answers = iter([chat_answer(prompt=1000, completion=100), chat_answer(prompt=1001, completion=100)])
    transport = httpx.MockTransport(lambda _r: httpx.Response(200, json=next(answers)))
    async with running_app(settings_for(tmp_path, [LONG_PRICED]), transport) as app:
        client = openai_client(app, await new_key(app))
        costs = []
        for _ in range(2):
            raw = await client.chat.completions.with_raw_response.create(
                model="long", messages=[{"role": "user", "content": "hi"}]
            )
            costs.append(Decimal(raw.headers["x-costgate-cost-usd"]))
    assert costs == [Decimal("0.0012"), Decimal("0.01201")]  # 1000 x $1 + 100 x $2; 1001 x $10 + 100 x $20


async def test_a_hold_takes_a_long_prompt_at_its_rates(tmp_path: Path) -> None:
    """A team with $0.01 left: a 1,500-token prompt with max_tokens 1,000 holds ~$0.0036 at the
    plain rates, ~$0.036 at the long-prompt ones. The hold must be the latter: refused, and the
    upstream never asked."""
    asked: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        asked.append(request)
        return httpx.Response(200, json=chat_answer(prompt=1500, completion=1000))

    async with running_app(settings_for(tmp_path, [LONG_PRICED]), httpx.MockTransport(answer)) as app:
        key = await new_key(app, team="long-team")
        await team_budget(app, "long-team", "0.01")
        client = openai_client(app, key)
        short = await client.chat.completions.with_raw_response.create(
            model="long", messages=[{"role": "user", "content": "hi"}], max_tokens=1000
        )
        assert short.http_response.status_code == 200 and len(asked) == 1  # ~$0.002 held: within the budget
        with pytest.raises(Exception) as refused:
            await client.chat.completions.create(
                model="long", messages=[{"role": "user", "content": "word " * 1500}], max_tokens=1000
            )
    assert getattr(refused.value, "status_code", None) in (402, 429), refused.value
    assert len(asked) == 1  # the long prompt never reached the provider
