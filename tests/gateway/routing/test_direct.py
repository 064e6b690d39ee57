"""The plain route target (gateway/upstream/calls.py `DirectTarget`, answered whole): a deployment,
then its fallbacks in order; a failed call is not charged and counts against its breaker; an
open breaker is skipped without a call; the client's own fault is not retried elsewhere. The
upstreams are faked at the provider interface. (Streaming and the worst case are being reworked
for issue 16 item 2 and are tested through the gateway meanwhile.)"""

from __future__ import annotations

import asyncio
from decimal import Decimal

import pytest

from gateway.core.context import RequestContext
from gateway.core.errors import CircuitOpen, InvalidRequest, UnreadableAnswer, UpstreamError, UpstreamTimeout
from gateway.core.tokens import count_prompt, count_text
from gateway.metrics import Metrics
from gateway.routing.direct import DirectTarget
from gateway.upstream.deployments import Deployment
from gateway.upstream.worst_case import prompt_bound
from policies.breaker import BreakerConfig, Breakers
from policies.pricing import Usage
from tests.gateway.fakes import TEAM_A, TEAM_B, ScriptedProvider, chat_answer, deployment, request


def chain(primary: list, fallback: list) -> tuple[dict[str, Deployment], ScriptedProvider, ScriptedProvider]:
    p, f = ScriptedProvider("primary", primary), ScriptedProvider("backup", fallback)
    deployments = {
        "primary": deployment(
            "primary", upstream="primary-v1", input_per_mtok="1", output_per_mtok="2", provider=p, fallbacks=("backup",)
        ),
        "backup": deployment("backup", upstream="backup-v1", input_per_mtok="3", output_per_mtok="4", provider=f),
    }
    return deployments, p, f


def target(
    deployments: dict[str, Deployment], breakers: Breakers | None = None, metrics: Metrics | None = None
) -> DirectTarget:
    breakers = breakers or Breakers(BreakerConfig(min_requests=1, max_error_rate=0.5))
    return DirectTarget(deployments["primary"], deployments, metrics or Metrics(), breakers)


def ask() -> RequestContext:
    return request(
        {"model": "primary", "messages": [{"role": "user", "content": "hi"}]},
        principal=TEAM_A,
        requested_model="primary",
    )


async def test_the_deployment_answers_and_its_bytes_are_relayed() -> None:
    answer = chat_answer("hello", Usage(10, 5), model="primary-v1")
    deployments, primary, backup = chain([answer], [])
    ctx = ask()
    response = await target(deployments).answer(ctx)
    assert response.body == answer.raw  # untouched
    assert primary.calls[0].body["model"] == "primary-v1" and backup.calls == []
    assert (ctx.outcome.served_model, ctx.outcome.provider, ctx.outcome.response_body) == (
        "primary",
        "openai",
        answer.body,
    )
    assert ctx.meter.usage == Usage(10, 5) and ctx.meter.cost == Decimal("0.00002")  # 10 x $1/M + 5 x $2/M


@pytest.mark.parametrize("failure", [UpstreamError("bad gateway"), UpstreamTimeout("slow")])
async def test_a_failed_call_falls_back_and_only_the_answer_is_charged(failure: UpstreamError) -> None:
    deployments, primary, backup = chain([failure], [chat_answer("from backup", Usage(10, 5))])
    breakers, metrics = Breakers(BreakerConfig(min_requests=1, max_error_rate=0.5)), Metrics()
    ctx = ask()
    response = await target(deployments, breakers, metrics).answer(ctx)
    assert b"from backup" in response.body
    assert len(primary.calls) == 1 and backup.calls[0].body["model"] == "backup-v1"
    assert ctx.outcome.served_model == "backup"
    assert ctx.meter.usage == Usage(10, 5) and ctx.meter.cost == Decimal("0.00005")  # the backup's price, once
    assert breakers.views()["primary"].errors == 1 and breakers.views()["backup"].errors == 0
    assert (
        metrics.registry.get_sample_value("costgate_upstream_errors_total", {"model": "primary", "code": failure.code})
        == 1
    )


async def test_when_every_deployment_fails_the_last_error_is_the_answer_and_nothing_is_charged() -> None:
    deployments, _, _ = chain([UpstreamError("bad gateway")], [UpstreamTimeout("slow")])
    ctx = ask()
    with pytest.raises(UpstreamTimeout):
        await target(deployments).answer(ctx)
    assert ctx.meter.cost == 0 and ctx.meter.usage == Usage() and ctx.outcome.served_model is None


async def test_an_open_breaker_is_skipped_without_a_call() -> None:
    deployments, primary, backup = chain([], [chat_answer("from backup", Usage(1, 1))])
    breakers = Breakers(BreakerConfig(min_requests=1, max_error_rate=0.5))
    breakers.record("primary", False, TEAM_A.team_id)  # open for team A
    ctx = ask()
    await target(deployments, breakers).answer(ctx)
    assert primary.calls == [] and len(backup.calls) == 1 and ctx.outcome.served_model == "backup"


async def test_with_every_breaker_open_the_answer_is_503_circuit_open() -> None:
    deployments, primary, backup = chain([], [])
    breakers = Breakers(BreakerConfig(min_requests=1, max_error_rate=0.5))
    for name in ("primary", "backup"):
        breakers.record(name, False, TEAM_A.team_id)
    with pytest.raises(CircuitOpen) as refused:
        await target(deployments, breakers).answer(ask())
    assert refused.value.status == 503 and "'primary'" in refused.value.message  # the first one skipped
    assert primary.calls == backup.calls == []


async def test_the_clients_own_fault_is_not_tried_elsewhere_nor_held_against_the_upstream() -> None:
    deployments, primary, backup = chain([InvalidRequest("max_tokens is too large", param="max_tokens")], [])
    breakers = Breakers(BreakerConfig(min_requests=1, max_error_rate=0.5))
    with pytest.raises(InvalidRequest):
        await target(deployments, breakers).answer(ask())
    assert backup.calls == []
    view = breakers.views().get("primary")
    assert view is None or view.errors == 0


async def test_an_answer_without_usage_is_charged_the_held_prompt_and_every_choice() -> None:
    """No usage reported: the prompt at what the hold counts (the most the provider can bill),
    the completion counted over every choice, each a sequence of its own."""
    answer = chat_answer("first")
    answer.body["choices"].append(
        {"index": 1, "message": {"role": "assistant", "content": " second"}, "finish_reason": "stop"}
    )
    deployments, _, _ = chain([answer], [])
    ctx = ask()
    await target(deployments).answer(ctx)
    expected = Usage(prompt_bound(ctx, deployments["primary"]), count_text("first\n second", "primary-v1"))
    assert ctx.meter.usage == expected and expected.completion_tokens >= 2
    assert expected.prompt_tokens >= count_prompt(ctx.body, "primary-v1")


def half_open() -> Breakers:
    """Breakers on a fake clock whose `primary` is half-open: the next call is its probe."""
    now = [0.0]
    breakers = Breakers(BreakerConfig(min_requests=2, max_error_rate=0.5, open_s=5), clock=lambda: now[0])
    for team in ("x", "y") * 2:
        breakers.record("primary", False, team)
    now[0] = 6
    return breakers


@pytest.mark.parametrize("ending", [InvalidRequest("the upstream refused it"), asyncio.CancelledError()])
async def test_a_probe_that_says_nothing_of_the_deployment_frees_the_slot_for_the_next_team(
    ending: BaseException,
) -> None:
    ok = chat_answer("fine", Usage(3, 1))
    deployments, primary, backup = chain([ending, ok], [])
    breakers = half_open()
    with pytest.raises(type(ending)):  # a team's bad request (or a cancelled one) is the probe
        await target(deployments, breakers).answer(ask())
    other = request(
        {"model": "primary", "messages": [{"role": "user", "content": "hi"}]},
        principal=TEAM_B,
        requested_model="primary",
    )
    response = await target(deployments, breakers).answer(other)  # probes at once, not 30 s later
    assert b"fine" in response.body and len(primary.calls) == 2 and backup.calls == []
    assert breakers.views()["primary"].state.value == "closed"


async def test_a_2xx_answer_the_gateway_cannot_read_is_charged_at_its_worst_case_and_ends_the_chain() -> None:
    deployments, primary, backup = chain([UnreadableAnswer("not JSON")], [chat_answer("from backup", Usage(10, 5))])
    ctx = ask()
    ctx.body["max_tokens"] = 50
    hold = target(deployments).worst_case_cost(ctx)
    with pytest.raises(UnreadableAnswer):
        await target(deployments).answer(ctx)
    # the provider billed the call it answered 200: its prompt at the hold's bound, 50 tokens out
    # (the hold covers one call, so no fallback is asked to answer on top of it)
    assert ctx.meter.cost == prompt_bound(ctx, deployments["primary"]) * Decimal(1) / 10**6 + 50 * Decimal(2) / 10**6
    assert ctx.meter.usage.completion_tokens == 50 and backup.calls == [] and 0 < ctx.meter.cost <= hold
