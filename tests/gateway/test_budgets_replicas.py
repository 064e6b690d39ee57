"""Budgets across two gateway processes sharing one Redis and one PostgreSQL database, driven
by the official openai SDK against the fake upstream: concurrency, exactness, failures,
streams, traces, chargeback and alerts."""

from __future__ import annotations

import asyncio
import csv
import io
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal

import openai
import pytest

from tests.conftest import standard_models
from tests.gateway.budget_support import SHARED_REDIS, WebhookReceiver, fresh_postgres, price_cost, redis_prefix
from tests.support import FakeUpstream, GatewayProcess

pytestmark = pytest.mark.slow  # boots processes: not in the fast lane

SMALL_IN, SMALL_OUT = "0.15", "0.6"  # the `small` model's price in standard_models


@pytest.fixture(scope="module")
def hook() -> Iterator[WebhookReceiver]:
    receiver = WebhookReceiver(fail_first=2)
    yield receiver
    receiver.close()


@pytest.fixture(scope="module")
def replicas(
    tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream, hook: WebhookReceiver
) -> Iterator[tuple[GatewayProcess, GatewayProcess]]:
    with fresh_postgres() as pg_url, redis_prefix() as prefix:
        config = {
            "models": standard_models(fake_upstream.url),
            "database_url": pg_url,
            "redis_url": SHARED_REDIS,
            "cache": {"exact": {"enabled": False}},  # repeated questions must be calls that spend
            "budgets": {"redis_prefix": prefix, "refresh_s": 0.2},
            "rate_limits": {"teams": {"limited": {"requests_per_minute": 3}}},
            "plans": {"free": {"dollar_cap_usd": "0.00006", "tarpit_s": 0.2}},
            "alerts": {
                "webhook_url": hook.url,
                "backoff_s": 0.05,
                "retries": 4,
                "spend_rate_per_hour_usd": "0.0008",
                "total_spend_rate_per_hour_usd": "0.0005",
            },
        }
        a = GatewayProcess(config, tmp_path_factory.mktemp("replica-a"))
        b = GatewayProcess(config, tmp_path_factory.mktemp("replica-b"))
        try:
            yield a, b
        finally:
            a.stop()
            b.stop()


def put_budget(replicas: tuple[GatewayProcess, ...], **fields: object) -> dict:
    """PUT one budget through every replica: each PUT replaces the same row and takes effect at
    once on the replica that made it, so no test waits out budgets.refresh_s (that the others
    see a change within refresh_s is tests/gateway/storage/test_budgets_table.py's, on a clock)."""
    stored = []
    for gw in replicas:
        response = gw.admin("PUT", "/admin/budgets", json=fields)
        assert response.status_code == 200, response.text
        stored.append(response.json())
    assert len({b["id"] for b in stored}) == 1, stored  # one budget, not one per replica
    return stored[0]


def budget_of(gw: GatewayProcess, budget_id: str) -> dict:
    data = gw.admin("GET", "/admin/budgets").json()["data"]
    return next(b for b in data if b["id"] == budget_id)


def ledger_total(replicas: tuple[GatewayProcess, ...], team_id: str) -> Decimal:
    for gw in replicas:  # each flushes its own queued rows
        gw.spend()
    rows = replicas[0].spend("team")["rows"]
    return sum((Decimal(r["cost_usd"]) for r in rows if r["group"] == team_id), Decimal(0))


def team_id(gw: GatewayProcess, name: str) -> str:
    return next(t["id"] for t in gw.admin("GET", "/admin/teams").json()["data"] if t["name"] == name)


PROMPT = " ".join(f"w{i}" for i in range(40))


async def _one(client: openai.AsyncOpenAI) -> tuple[int, Decimal, Decimal, dict | None]:
    """(status, header cost, usage x price, error body) of one request."""
    try:
        raw = await client.chat.completions.with_raw_response.create(
            model="small", messages=[{"role": "user", "content": PROMPT}], max_tokens=20
        )
    except openai.APIStatusError as err:
        return err.status_code, Decimal(err.response.headers["x-costgate-cost-usd"]), Decimal(0), err.body
    usage = raw.parse().usage
    assert usage is not None
    return (
        200,
        Decimal(raw.headers["x-costgate-cost-usd"]),
        price_cost(usage.prompt_tokens, usage.completion_tokens, SMALL_IN, SMALL_OUT),
        None,
    )


def test_200_concurrent_requests_never_overrun_a_shared_team_budget(replicas):
    a, b = replicas
    key_a = a.new_key("crowd")
    tid = team_id(a, "crowd")
    # One request costs $1.8e-5 (40 prompt + 20 output tokens upstream) and reserves $3.12e-5
    # (112 prompt tokens: the body as text; 24 output: max_tokens and the stream meter's slack).
    budget = put_budget(replicas, scope="team", id="crowd", amount_usd="0.00115", period="monthly")

    async def run() -> list[tuple[int, Decimal, Decimal, dict | None]]:
        clients = [a.async_client(key_a), b.async_client(key_a)]
        try:
            return await asyncio.gather(*(_one(clients[i % 2]) for i in range(200)))
        finally:
            for c in clients:
                await c.close()

    results = asyncio.run(run())
    statuses = [r[0] for r in results]
    assert set(statuses) <= {200, 402}, statuses
    assert 0 < statuses.count(200) < 200 and statuses.count(402) > 0
    refused = next(r[3] for r in results if r[0] == 402)
    assert refused is not None and refused["code"] == "budget_exceeded"
    header_sum = sum((r[1] for r in results), Decimal(0))
    upstream_sum = sum((r[2] for r in results), Decimal(0))
    ledger_sum = ledger_total(replicas, tid)
    assert header_sum == ledger_sum == upstream_sum  # exact, not just to the cent
    amount = Decimal(budget["amount_usd"])
    assert ledger_sum <= amount
    assert ledger_sum >= amount / 2, f"only {ledger_sum} of {amount} was usable"
    for gw in replicas:
        view = budget_of(gw, budget["id"])
        assert Decimal(view["spent_usd"]) == ledger_sum
        assert Decimal(view["reserved_usd"]) == 0


def test_spend_rate_alerts_fire_once_per_hour_per_team_and_overall(replicas, hook):
    a, _ = replicas  # runs after the crowd above spent about $0.001 in this hour
    crowd = team_id(a, "crowd")
    hook.wait_for(
        lambda: {x["subject"] for x in hook.accepted if x["type"] == "spend_rate"} >= {"all", f"team:{crowd}"}
    )
    rate_alerts = [(x["subject"], x["period"]) for x in hook.accepted if x["type"] == "spend_rate"]
    assert sorted(rate_alerts) == sorted([("all", "hourly"), (f"team:{crowd}", "hourly")])
    rates = {r["subject"]: r for r in a.admin("GET", "/admin/budgets").json()["spend_rate"]}
    assert rates["all"]["alerted_at"] is not None and rates[f"team:{crowd}"]["alerted_at"] is not None
    assert 0 < Decimal(rates[f"team:{crowd}"]["spent_usd"]) <= ledger_total(replicas, crowd)  # <: an hour may turn
    assert (
        'costgate_budget_alerts_total{kind="spend_rate"'
        in a.admin("GET", "/metrics").text + replicas[1].admin("GET", "/metrics").text
    )


def test_a_request_failing_upstream_releases_its_reservation(replicas, fake_upstream):
    a, b = replicas
    key = a.new_key("fails")
    budget = put_budget(replicas, scope="key", id=_key_id(a, "fails"), amount_usd="5", period="daily")
    with pytest.raises(openai.APIStatusError) as err:
        b.client(key).chat.completions.create(model="always-500", messages=[{"role": "user", "content": "hi"}])
    assert err.value.status_code == 502
    view = budget_of(a, budget["id"])
    assert Decimal(view["reserved_usd"]) == 0 and Decimal(view["spent_usd"]) == 0
    # A failure that falls back is charged once, for the deployment that answered.
    raw = b.client(key).chat.completions.with_raw_response.create(
        model="broken", messages=[{"role": "user", "content": "one two three"}]
    )
    view = budget_of(a, budget["id"])
    assert Decimal(view["spent_usd"]) == Decimal(raw.headers["x-costgate-cost-usd"]) > 0
    assert Decimal(view["reserved_usd"]) == 0


def _key_id(gw: GatewayProcess, team: str) -> str:
    tid = team_id(gw, team)
    return [k for k in gw.admin("GET", "/admin/keys").json()["data"] if k["team_id"] == tid][-1]["id"]


def test_a_streamed_request_is_charged_to_its_budget(replicas):
    a, b = replicas
    key = a.new_key("streams")
    budget = put_budget(replicas, scope="team", id="streams", amount_usd="1", period="weekly")
    stream = b.client(key).chat.completions.create(
        model="small",
        messages=[{"role": "user", "content": "stream these words please"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    usage = chunks[-1].usage
    assert usage is not None
    cost = Decimal(usage.model_extra["cost_usd"])
    assert cost == price_cost(usage.prompt_tokens, usage.completion_tokens, SMALL_IN, SMALL_OUT) > 0
    view = budget_of(a, budget["id"])
    assert Decimal(view["spent_usd"]) == cost == ledger_total(replicas, team_id(a, "streams"))
    assert Decimal(view["reserved_usd"]) == 0


def test_user_and_tag_budgets_apply_too(replicas):
    a, b = replicas
    key = a.new_key("tagged")
    put_budget(replicas, scope="tag", id="project=zeta", amount_usd="0.0000001", period="daily")
    with pytest.raises(openai.APIStatusError) as err:
        b.client(key).chat.completions.create(
            model="small", messages=[{"role": "user", "content": "hi"}], metadata={"project": "zeta"}
        )
    assert err.value.status_code == 402 and err.value.body["code"] == "budget_exceeded"
    put_budget(replicas, scope="user", id="end-user-9", amount_usd="0.0000001", period="total")
    with pytest.raises(openai.APIStatusError) as err:
        b.client(key).chat.completions.create(
            model="small", messages=[{"role": "user", "content": "hi"}], user="end-user-9"
        )
    assert err.value.status_code == 402
    ok = b.client(key).chat.completions.create(
        model="small", messages=[{"role": "user", "content": "hi"}], user="end-user-10"
    )
    assert ok.choices[0].message.content == "echo: hi"  # another user's budget does not apply


def test_a_trace_sums_its_calls_into_one_transaction(replicas):
    a, b = replicas
    key = a.new_key("traced")
    costs = []
    for gw, words in ((a, "one"), (b, "one two"), (a, "one two three")):
        raw = gw.client(key).chat.completions.with_raw_response.create(
            model="small", messages=[{"role": "user", "content": words}], extra_headers={"x-costgate-trace-id": "tx-42"}
        )
        costs.append(Decimal(raw.headers["x-costgate-cost-usd"]))
    b.spend()
    trace = a.admin("GET", "/admin/traces/tx-42").json()
    assert trace["requests"] == 3 and len(trace["calls"]) == 3
    assert Decimal(trace["cost_usd"]) == sum(costs)
    assert a.admin("GET", "/admin/traces/no-such-trace").status_code == 404


def test_chargeback_csv_has_one_line_per_team_model_and_tags(replicas):
    a, b = replicas
    key = a.new_key("invoiced", tags=["dept=ml"])
    client = b.client(key)
    for model, tags in (("small", None), ("large", None), ("small", "feature-x")):
        headers = {"x-costgate-tags": tags} if tags else {}
        client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "bill me"}], extra_headers=headers
        )
    b.spend()
    month = datetime.now(UTC).strftime("%Y-%m")
    response = a.admin("GET", f"/admin/chargeback.csv?month={month}")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/csv")
    lines = [r for r in csv.DictReader(io.StringIO(response.text)) if r["team"] == "invoiced"]
    assert sorted((r["model"], r["tags"]) for r in lines) == [
        ("large", "dept=ml"),
        ("small", "dept=ml"),
        ("small", "dept=ml+feature-x"),
    ]
    assert sum(Decimal(r["cost_usd"]) for r in lines) == ledger_total(replicas, team_id(a, "invoiced"))
    assert a.admin("GET", "/admin/chargeback.csv?month=2026-13").status_code == 400


def test_threshold_alerts_are_sent_once_with_retries(replicas, hook):
    a, b = replicas
    key = a.new_key("alerted")
    budget = put_budget(replicas, scope="team", id="alerted", amount_usd="0.00004", period="daily", alert_at=[0.5, 1.0])
    client = b.client(key)
    for _ in range(3):  # each costs ~$1.2e-5 and reserves ~$2.5e-5: the 2nd passes 50%
        try:
            client.chat.completions.create(model="small", messages=[{"role": "user", "content": PROMPT}], max_tokens=10)
        except openai.APIStatusError as err:
            assert err.status_code == 402
    hook.wait_for(lambda: any(x["budget_id"] == budget["id"] for x in hook.accepted))
    mine = [x for x in hook.accepted if x["budget_id"] == budget["id"]]
    assert [x["threshold"] for x in mine] == [0.5]
    assert mine[0]["type"] == "budget_threshold" and mine[0]["period"] == "daily"
    assert len(hook.attempts) >= 3  # the first two deliveries were refused and retried
    view = budget_of(a, budget["id"])
    assert [x["threshold"] for x in view["alerts"]] == [0.5]
    metrics = b.admin("GET", "/metrics").text
    assert 'costgate_budget_alerts_total{kind="budget_threshold"' in metrics
    assert "costgate_alert_webhook_failures_total" in metrics
    ratio = next(
        float(line.rsplit(" ", 1)[1])
        for line in metrics.splitlines()
        if line.startswith("costgate_budget_used_ratio{") and budget["id"] in line
    )
    assert 0.5 <= ratio <= 1.0  # the burn-rate alert's input: spend over the budget


def test_team_rate_limit_answers_429_with_retry_after(replicas):
    a, b = replicas
    key = a.new_key("limited")
    statuses = []
    for gw in (a, b, a, b):
        try:
            gw.client(key).chat.completions.create(model="small", messages=[{"role": "user", "content": "hi"}])
            statuses.append(200)
        except openai.RateLimitError as err:
            statuses.append(429)
            assert 1 <= int(err.response.headers["retry-after"]) <= 60
            assert err.body["code"] == "rate_limit_exceeded"
    assert statuses == [200, 200, 200, 429]


def test_budget_admin_validation(replicas):
    a, _ = replicas
    assert (
        a.admin(
            "PUT", "/admin/budgets", json={"scope": "team", "id": "no-such-team", "amount_usd": "1", "period": "daily"}
        ).status_code
        == 404
    )
    bad = a.admin("PUT", "/admin/budgets", json={"scope": "planet", "id": "x", "amount_usd": "1", "period": "daily"})
    assert bad.status_code == 400 and bad.json()["error"]["type"] == "invalid_request_error"
    assert (
        a.admin(
            "PUT", "/admin/budgets", json={"scope": "tag", "id": "x", "amount_usd": "-1", "period": "daily"}
        ).status_code
        == 400
    )
    assert (
        a.admin(
            "PUT", "/admin/budgets", json={"scope": "tag", "id": "x", "amount_usd": "1", "period": "hourly"}
        ).status_code
        == 400
    )
    created = put_budget(replicas, scope="tag", id="temp", amount_usd="2", period="total")
    assert a.admin("DELETE", f"/admin/budgets/{created['id']}").status_code == 200
    assert a.admin("DELETE", f"/admin/budgets/{created['id']}").status_code == 404


def test_free_plan_rules_cheap_models_tarpit_and_a_hard_dollar_cap(replicas):
    a, b = replicas
    key = a.new_key("freeloaders", plan="free")
    client = b.client(key)
    with pytest.raises(openai.PermissionDeniedError) as err:  # $10 per million output tokens: not cheap
        client.chat.completions.create(model="large", messages=[{"role": "user", "content": "hi"}])
    assert err.value.body["code"] == "model_not_allowed"
    started = time.monotonic()
    client.chat.completions.create(model="small", messages=[{"role": "user", "content": "hi"}], max_tokens=5)
    assert time.monotonic() - started >= 0.2  # the tarpit's delay (a lower bound: sleeps never end early)
    statuses = []
    for _ in range(6):  # ~$1.8e-5 each ($3.1e-5 worst case) against the $0.00006 cap (lowered from $1)
        try:
            client.chat.completions.create(model="small", messages=[{"role": "user", "content": PROMPT}], max_tokens=20)
            statuses.append(200)
        except openai.APIStatusError as err:
            statuses.append(err.status_code)
    assert statuses[:2] == [200, 200] and statuses[-1] == 402
    spent = ledger_total(replicas, team_id(a, "freeloaders"))
    assert spent <= Decimal("0.00006")
