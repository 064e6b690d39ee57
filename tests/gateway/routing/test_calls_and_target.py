"""A routing policy's own upstream calls (gateway/routing/calls.py) — charged to the request,
counted from the call's own body when the upstream reports no usage, never naming the served
model — and the error a target gives for an open breaker (gateway/routing/target.py)."""

from __future__ import annotations

from decimal import Decimal

from gateway.core.context import Endpoint
from gateway.core.errors import CircuitOpen
from gateway.core.tokens import billed_prompt_tokens, count_prompt, count_text
from gateway.routing.target import circuit_open
from gateway.upstream.calls import complete
from policies.breaker import BreakerConfig, Breakers
from policies.pricing import Bill, Usage
from tests.gateway.fakes import TEAM_A, ScriptedProvider, chat_answer, deployment, request

JUDGE_BODY = {
    "model": "judge-v1",
    "max_tokens": 5,
    "messages": [{"role": "user", "content": "Grade this answer from 1 to 10: Paris is in France."}],
}


async def test_a_policy_call_is_charged_to_the_request_but_does_not_answer_it() -> None:
    provider = ScriptedProvider("judge", [chat_answer("9", Usage(40, 1))])
    judge = deployment("judge", upstream="judge-v1", input_per_mtok="10", output_per_mtok="30", provider=provider)
    ctx = request(principal=TEAM_A, requested_model="auto", served_model="small")
    ctx.meter.add_call("small", Usage(100, 20), Bill(Decimal("0.0001")))  # the tier call made before
    completion = await complete(ctx, judge, JUDGE_BODY, Endpoint.CHAT)
    assert completion.body["choices"][0]["message"]["content"] == "9"
    [call] = provider.calls
    assert call.body == JUDGE_BODY and call.endpoint is Endpoint.CHAT and not call.stream
    assert ctx.meter.usage == Usage(140, 21)
    assert ctx.meter.cost == Decimal("0.0001") + Decimal("0.00043")  # 40 x $10/M + 1 x $30/M
    assert ctx.outcome.served_model == "small"  # still the tier whose answer the client gets


async def test_without_usage_the_call_is_counted_from_its_own_body_not_the_clients() -> None:
    provider = ScriptedProvider("judge", [chat_answer("a grade of nine")])
    judge = deployment("judge", upstream="judge-v1", provider=provider)
    client_body = {"model": "auto", "messages": [{"role": "user", "content": "word " * 500}]}
    ctx = request(client_body, principal=TEAM_A, requested_model="auto")
    await complete(ctx, judge, JUDGE_BODY)
    # judge-v1's tokenizer is not tiktoken's: its prompt counts at the bound a hold uses, the JSON
    # body's UTF-8 bytes (a tiktoken estimate would be below what such a provider can bill)
    expected = Usage(billed_prompt_tokens(JUDGE_BODY, "judge-v1"), count_text("a grade of nine", "judge-v1"))
    assert expected.prompt_tokens > count_prompt(JUDGE_BODY, "gpt-4o")
    assert ctx.meter.usage == expected and expected.prompt_tokens < 200  # the judge's body, not the client's
    assert (
        ctx.meter.cost == expected.prompt_tokens * judge.price.input + expected.completion_tokens * judge.price.output
    )


async def test_the_call_runs_on_the_requests_endpoint_unless_told_otherwise() -> None:
    provider = ScriptedProvider("m", [chat_answer("x", Usage(1, 1))])
    ctx = request({"model": "m", "prompt": "x"}, endpoint=Endpoint.COMPLETIONS, principal=TEAM_A)
    await complete(ctx, deployment("m", provider=provider), {"model": "m", "prompt": "x"})
    assert provider.calls[0].endpoint is Endpoint.COMPLETIONS


def test_an_open_breaker_is_a_503_with_the_time_until_its_probe() -> None:
    now = [1000.0]
    breakers = Breakers(BreakerConfig(min_requests=2, max_error_rate=0.5, open_s=30), clock=lambda: now[0])
    for _ in range(2):
        breakers.record("small", False, "team")
    assert not breakers.allow("small", "team")
    now[0] += 10
    err = circuit_open(breakers, "small", "team")
    assert isinstance(err, CircuitOpen) and (err.status, err.code) == (503, "circuit_open")
    assert err.retry_after == 20 and "'small'" in err.message
