"""The compress stage: which requests it touches, the conversation it hands on (head, summary,
recent turns), the summarizer call it charges, the fallback to an extractive summary, and the
metrics. The summarizer's upstream is faked at the provider interface; tokens are tiktoken's."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from engine.admission import Priority
from gateway.config.settings import CompressionConfig
from gateway.core.context import Decisions, Endpoint, RequestContext
from gateway.core.errors import UpstreamError, UpstreamTimeout
from gateway.core.tokens import count_messages
from gateway.routing.cascade_metrics import PolicyMetrics
from gateway.stages.compress import Compress
from gateway.upstream.deployments import Deployment
from policies.breaker import BreakerConfig, Breakers
from policies.compression import SUMMARY_PREFIX
from policies.pricing import Usage
from tests.gateway.fakes import TEAM_A, ScriptedProvider, chat_answer, deployment, guarded, request

SYSTEM = {"role": "system", "content": "You are a terse assistant."}


def turn(i: int) -> dict[str, str]:
    role = "user" if i % 2 == 0 else "assistant"
    return {"role": role, "content": f"Turn {i} talks about topic number {i}. " + "More detail follows here. " * 8}


LONG = [SYSTEM, *(turn(i) for i in range(10))]  # about 600 tokens


def build(
    summarizer: ScriptedProvider | None = None, breakers: Breakers | None = None, **config: Any
) -> tuple[Compress, CollectorRegistry]:
    registry = CollectorRegistry()
    deployments: dict[str, Deployment] = {"small": deployment("small")}
    if summarizer is not None:
        deployments["cheap"] = deployment(
            "cheap", upstream="cheap-v1", input_per_mtok="1", output_per_mtok="4", provider=summarizer
        )
        config.setdefault("summarizer", "cheap")
    settings = CompressionConfig.model_validate({"enabled": True, "budget_tokens": 200, "keep_recent": 2, **config})
    return Compress(settings, deployments, PolicyMetrics(registry), guarded(breakers)), registry


def chat(messages: list[dict[str, Any]], model: str = "small", **fields: Any) -> RequestContext:
    return request({"model": model, "messages": messages}, principal=TEAM_A, requested_model=model, **fields)


def counted(registry: CollectorRegistry, name: str, model: str = "small") -> float | None:
    return registry.get_sample_value(name, {"model": model})


async def test_a_long_chat_keeps_its_head_and_recent_turns_around_an_extractive_summary() -> None:
    stage, registry = build()
    ctx = chat(LONG)
    original = ctx.body
    assert await stage(ctx) is None
    messages = ctx.sent_body["messages"]
    assert messages[0] == SYSTEM and messages[-2:] == LONG[-2:]
    assert len(messages) == 4 and messages[1]["role"] == "system"
    summary = messages[1]["content"]
    assert summary.startswith(SUMMARY_PREFIX) and "Turn 7 talks about topic number 7." in summary
    saved = count_messages(LONG) - count_messages(messages)
    assert saved > 0 and ctx.compressed_tokens == saved
    assert ctx.body is original and original["messages"] == LONG  # what was asked stays as asked
    assert ctx.sent_messages == messages
    assert ctx.meter.cost == 0 and ctx.meter.usage == Usage()  # no summarizer: no upstream call
    assert counted(registry, "costgate_compressions_total") == 1
    assert counted(registry, "costgate_compression_tokens_saved_total") == saved


async def test_a_summarizer_writes_the_summary_and_its_call_is_charged_to_the_request() -> None:
    summarizer = ScriptedProvider("cheap", [chat_answer("  Ten turns about topics 0-7.  ", Usage(500, 10))])
    stage, _ = build(summarizer, summary_max_tokens=64)
    ctx = chat(LONG)
    await stage(ctx)
    assert ctx.sent_body["messages"][1] == {"role": "system", "content": SUMMARY_PREFIX + "Ten turns about topics 0-7."}
    [call] = summarizer.calls
    assert call.endpoint is Endpoint.CHAT
    assert call.body["model"] == "cheap-v1" and call.body["max_tokens"] == 64 and call.body["temperature"] == 0
    transcript = call.body["messages"][-1]["content"]
    assert "Turn 0 talks" in transcript and "Turn 9 talks" not in transcript  # only what is dropped
    assert ctx.meter.usage == Usage(500, 10)
    assert ctx.meter.cost == Decimal("0.00054")  # 500 x $1/M + 10 x $4/M
    assert ctx.outcome.served_model is None  # the summary is not the answer the client gets


@pytest.mark.parametrize("answer", [UpstreamError("bad gateway"), UpstreamTimeout("slow"), chat_answer("   ")])
async def test_a_failed_or_empty_summary_falls_back_to_the_extractive_one(answer: Any) -> None:
    stage, registry = build(ScriptedProvider("cheap", [answer]))
    ctx = chat(LONG)
    await stage(ctx)
    assert "Turn 7 talks about topic number 7." in ctx.sent_body["messages"][1]["content"]
    assert ctx.compressed_tokens > 0 and counted(registry, "costgate_compressions_total") == 1


async def test_the_summary_call_is_guarded_by_the_summarizers_breaker_and_runs_in_the_requests_class() -> None:
    breakers = Breakers(BreakerConfig(min_requests=1, max_error_rate=0.0, min_failing_teams=1, open_s=600))
    summarizer = ScriptedProvider("cheap", [UpstreamError("bad gateway"), chat_answer("never asked")])
    stage, _ = build(summarizer, breakers)
    await stage(chat(LONG, decided=Decisions(priority=Priority.BATCH)))
    assert [call.priority for call in summarizer.calls] == [Priority.BATCH]
    assert breakers["cheap"].view().errors == 1  # its failure was recorded, and opened the breaker
    ctx = chat(LONG)
    await stage(ctx)
    assert len(summarizer.calls) == 1  # refused while open: pruned extractively, nothing charged
    assert "Turn 7 talks about topic number 7." in ctx.sent_body["messages"][1]["content"] and ctx.meter.cost == 0


async def test_a_summary_longer_than_what_it_replaces_leaves_the_request_alone_but_charged() -> None:
    rambling = " ".join(["word"] * 2000)
    summarizer = ScriptedProvider("cheap", [chat_answer(rambling, Usage(500, 2000))])
    stage, registry = build(summarizer)
    ctx = chat(LONG)
    await stage(ctx)
    assert ctx.sent_body["messages"] == LONG and ctx.sent_messages is None and ctx.compressed_tokens == 0
    assert ctx.meter.usage == Usage(500, 2000) and ctx.meter.cost > 0  # the call was made: it is paid for
    assert counted(registry, "costgate_compressions_total") is None


@pytest.mark.parametrize(
    "case, config, ctx",
    [
        ("disabled", {"enabled": False}, chat(LONG)),
        ("fits the budget", {}, chat([SYSTEM, turn(0), turn(1)])),
        ("another model", {"models": ["large"]}, chat(LONG)),
        (
            "not a chat",
            {},
            request(
                {"model": "small", "prompt": "x" * 5000},
                endpoint=Endpoint.COMPLETIONS,
                principal=TEAM_A,
                requested_model="small",
            ),
        ),
        ("messages not a list", {}, chat("hello")),  # type: ignore[arg-type]
        ("nothing old to drop", {"keep_recent": 20}, chat(LONG)),
    ],
)
async def test_requests_it_does_not_touch(case: str, config: dict[str, Any], ctx: RequestContext) -> None:
    summarizer = ScriptedProvider("cheap", [chat_answer("unused")])
    stage, registry = build(summarizer, **config)
    before = dict(ctx.body)
    assert await stage(ctx) is None
    assert ctx.body == before and ctx.sent_messages is None and ctx.compressed_tokens == 0
    assert summarizer.calls == [] and ctx.meter.cost == 0
    assert counted(registry, "costgate_compressions_total") is None


async def test_the_models_it_covers_are_compressed() -> None:
    stage, _ = build(models=["small"])
    ctx = chat(LONG)
    await stage(ctx)
    assert ctx.compressed_tokens > 0


def test_an_unknown_summarizer_is_a_config_error() -> None:
    settings = CompressionConfig(enabled=True, summarizer="nope")
    with pytest.raises(ValueError, match="nope"):
        Compress(settings, {"small": deployment("small")}, PolicyMetrics(CollectorRegistry()), guarded())
