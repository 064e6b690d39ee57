"""Redis stopped and restarted (empty) in the middle of a run, on a redis-server of this test's
own: the fail-closed gateway answers 503 meanwhile, the fail-open one serves, neither crashes,
and after the restart the counters are seeded again from the ledger, so the budget still binds."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import openai
import pytest

from tests.conftest import standard_models
from tests.gateway.budget_support import OwnRedis
from tests.support import FakeUpstream, GatewayProcess

pytestmark = pytest.mark.slow  # boots processes: not in the fast lane

PROMPT = " ".join(f"w{i}" for i in range(40))  # $1.8e-5 per call on `small`, $3.12e-5 worst case
NO_CACHE = {"exact": {"enabled": False}}  # repeated questions must be calls that spend


@pytest.fixture(scope="module")
def own_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OwnRedis]:
    server = OwnRedis(tmp_path_factory.mktemp("redis"))
    yield server
    server.stop()


def _gateway(tmp: Path, upstream: FakeUpstream, redis_url: str, mode: str) -> GatewayProcess:
    return GatewayProcess(
        {
            "models": standard_models(upstream.url),
            "cache": NO_CACHE,
            "redis_url": redis_url,
            "budgets": {"on_store_error": mode, "redis_timeout_s": 0.2},
        },
        tmp,
    )


def _ask(gw: GatewayProcess, key: str) -> int:
    try:
        gw.client(key).chat.completions.create(
            model="small", messages=[{"role": "user", "content": PROMPT}], max_tokens=20
        )
        return 200
    except openai.APIStatusError as err:
        if err.status_code == 503:
            assert err.body["code"] == "budget_store_unavailable"
            assert err.response.headers["retry-after"] == "1"
        return err.status_code


def test_redis_restarted_mid_run(tmp_path_factory, fake_upstream, own_redis):
    closed = _gateway(tmp_path_factory.mktemp("closed"), fake_upstream, own_redis.url, "closed")
    opened = _gateway(tmp_path_factory.mktemp("open"), fake_upstream, own_redis.url, "open")
    try:
        key = closed.new_key("outage")
        open_key = opened.new_key("outage")
        budget = closed.admin(
            "PUT",
            "/admin/budgets",
            json={"scope": "team", "id": "outage", "amount_usd": "0.00011", "period": "monthly"},
        ).json()
        assert [_ask(closed, key) for _ in range(2)] == [200, 200]

        own_redis.stop()
        assert _ask(closed, key) == 503  # fail closed: nothing is spent unchecked
        assert _ask(opened, open_key) == 200  # fail open: served, uncounted
        unreadable = closed.admin("GET", "/admin/budgets")
        assert unreadable.status_code == 503 and unreadable.json()["error"]["code"] == "budget_store_unavailable"
        for gw in (closed, opened):
            assert gw.admin("GET", "/healthz").status_code == 200
            assert "costgate_budget_store_errors_total" in gw.admin("GET", "/metrics").text

        own_redis.start()  # empty: every counter is gone
        after = [_ask(closed, key) for _ in range(5)]
        # $0.00011 fits five requests in all ($1.8e-5 each, $3.12e-5 worst case); two were spent
        # before the restart. Had the counter
        # restarted from zero, all five would pass.
        assert after == [200, 200, 200, 402, 402]
        ledger = Decimal(closed.spend()["total_usd"])
        assert ledger <= Decimal("0.00011")
        view = next(b for b in closed.admin("GET", "/admin/budgets").json()["data"] if b["id"] == budget["id"])
        assert Decimal(view["spent_usd"]) == ledger and Decimal(view["reserved_usd"]) == 0
    finally:
        closed.stop()
        opened.stop()


def test_in_process_counters_survive_a_restart_through_the_ledger(tmp_path_factory, fake_upstream):
    """The embedded default (no Redis): counters live in the process; a restarted gateway
    seeds them from its SQLite ledger, so the budget still binds."""
    gw = GatewayProcess(
        {"models": standard_models(fake_upstream.url), "cache": NO_CACHE}, tmp_path_factory.mktemp("memory")
    )
    try:
        key = gw.new_key("embedded")
        gw.admin(
            "PUT",
            "/admin/budgets",
            json={"scope": "team", "id": "embedded", "amount_usd": "0.00007", "period": "daily"},
        )
        assert [_ask(gw, key) for _ in range(2)] == [200, 200]
        gw.stop()
        gw.start()
        # $1.8e-5 per call, $3.12e-5 worst case: three fit in all. Had the counter restarted
        # from zero, the fourth would fit too.
        assert [_ask(gw, key) for _ in range(2)] == [200, 402]
        data = gw.admin("GET", "/admin/budgets").json()["data"]
        assert Decimal(data[0]["spent_usd"]) == Decimal(gw.spend()["total_usd"]) <= Decimal("0.00007")
        assert Decimal(data[0]["reserved_usd"]) == 0
    finally:
        gw.stop()
