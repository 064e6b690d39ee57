"""The record stage: on settle, one ledger row carrying what the request was and cost, and the
metrics for it — refusals included; a request without a valid key gets no row, only a count.
The ledger is faked at its one method; the metrics are the real ones, on their own registry."""

from __future__ import annotations

from decimal import Decimal

import pytest

from gateway.core.context import CacheStatus, RequestContext
from gateway.core.meter import Meter
from gateway.metrics import Metrics
from gateway.stages.record import Record
from gateway.storage.ledger import LedgerRow
from policies.pricing import Bill, Usage
from tests.gateway.fakes import TEAM_A, request


class FakeLedger:
    def __init__(self) -> None:
        self.rows: list[LedgerRow] = []

    def record(self, row: LedgerRow) -> None:
        self.rows.append(row)


def build() -> tuple[Record, FakeLedger, Metrics]:
    ledger, metrics = FakeLedger(), Metrics()
    metrics.label_models({"small", "large"})
    return Record(ledger, metrics), ledger, metrics  # type: ignore[arg-type]


def sample(metrics: Metrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


def answered() -> RequestContext:
    ctx = request(
        principal=TEAM_A,
        requested_model="small",
        served_model="small",
        provider="openai",
        tags=("app", "env=prod"),
        trace_id="order-7",
        user="alice",
    )
    ctx.meter.add_call("small", Usage(1000, 500, 200), Bill(Decimal("0.0015")))
    ctx.meter.saved = Decimal("0.0002")
    return ctx


async def test_an_answer_gets_one_row_with_its_cost_in_picodollars() -> None:
    record, ledger, _ = build()
    ctx = answered()
    assert await record(ctx) is None and ledger.rows == []  # nothing before the answer is complete
    ctx.outcome.finish()
    await record.settle(ctx)
    [row] = ledger.rows
    assert (row.request_id, row.team_id, row.key_id, row.user) == ("req_test", "team_a1", "key_a1", "alice")
    assert row.tags == ",app,env=prod," and row.trace_id == "order-7"  # delimited: a tag matches whole
    assert (row.endpoint, row.requested_model, row.served_model, row.provider) == (
        "chat.completions",
        "small",
        "small",
        "openai",
    )
    assert (row.prompt_tokens, row.completion_tokens, row.cached_tokens) == (1000, 500, 200)
    assert row.cost_pusd == 1_500_000_000 and row.saved_pusd == 200_000_000
    assert (row.status, row.error, row.cache_status) == (200, None, "miss")
    assert row.latency_ms >= 0 and row.ttft_ms is None


async def test_an_answer_is_counted_in_the_metrics() -> None:
    record, _, metrics = build()
    await record.settle(answered())
    labels = {"team": "team-a", "model": "small"}
    assert sample(metrics, "costgate_requests_total", **labels, status="200", cache="miss") == 1
    assert sample(metrics, "costgate_tokens_total", **labels, kind="prompt") == 1000
    assert sample(metrics, "costgate_tokens_total", **labels, kind="completion") == 500
    assert sample(metrics, "costgate_cost_usd_total", **labels) == pytest.approx(0.0015)
    assert sample(metrics, "costgate_saved_usd_total", **labels, reason="other") == pytest.approx(0.0002)
    assert sample(metrics, "costgate_request_latency_seconds_count", model="small") == 1


async def test_a_refusal_of_a_known_key_is_recorded_with_its_status_and_reason() -> None:
    record, ledger, metrics = build()
    ctx = request(principal=TEAM_A, requested_model="large", status_code=402, error="over budget")
    await record.settle(ctx)
    [row] = ledger.rows
    assert (row.status, row.error, row.cost_pusd, row.served_model) == (402, "over budget", 0, None)
    assert sample(metrics, "costgate_requests_total", team="team-a", model="large", status="402", cache="miss") == 1


async def test_a_cache_hit_is_recorded_as_such() -> None:
    record, ledger, metrics = build()
    ctx = request(
        principal=TEAM_A,
        requested_model="small",
        served_model="small",
        cache_status=CacheStatus.EXACT,
        meter=Meter(saved=Decimal("0.002")),
    )
    await record.settle(ctx)
    assert ledger.rows[0].cache_status == "exact" and ledger.rows[0].cost_pusd == 0
    assert sample(metrics, "costgate_saved_usd_total", team="team-a", model="small", reason="exact") == pytest.approx(
        0.002
    )


async def test_a_request_without_a_valid_key_gets_no_row_only_a_count() -> None:
    record, ledger, metrics = build()
    await record.settle(request(api_key="sk-cg-wrong", requested_model="", status_code=401, error="invalid"))
    assert ledger.rows == []
    assert sample(metrics, "costgate_unauthenticated_requests_total", area="v1") == 1
    assert sample(metrics, "costgate_requests_total", team="", model="unknown", status="401", cache="miss") == 0


async def test_a_model_name_the_gateway_does_not_serve_is_labelled_unknown() -> None:
    record, ledger, metrics = build()
    await record.settle(request(principal=TEAM_A, requested_model="made-up-7", status_code=404, error="no model"))
    assert ledger.rows[0].requested_model == "made-up-7"  # the ledger keeps what was asked
    assert sample(metrics, "costgate_requests_total", team="team-a", model="unknown", status="404", cache="miss") == 1
