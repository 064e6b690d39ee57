"""Redis and PostgreSQL stopped and restarted under load — our own servers on free ports,
never the shared ones. Redis down: budgets fail closed (503 + retry-after) or open (served),
as configured. PostgreSQL down: known keys keep being served, unknown ones get 503, the
ledger queues its rows; and once either server is back the gateway recovers by itself, with
every answered request in the ledger."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import httpx
import pytest
import sqlalchemy

from tests.reliability.services import OwnPostgres, OwnRedis
from tests.support import FakeUpstream, GatewayProcess, model, wait_until

pytestmark = pytest.mark.slow  # boots processes: not in the fast lane

HI = [{"role": "user", "content": "hi"}]


class Load:
    """Requests sent back to back from a thread until stopped; statuses and request ids kept."""

    def __init__(self, gateway: GatewayProcess, key: str) -> None:
        self.gateway, self.key = gateway, key
        self.results: list[tuple[float, int, str, dict]] = []  # (time, status, request id, error)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Load:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        with httpx.Client(base_url=self.gateway.url, timeout=10) as client:
            while not self._stop.is_set():
                try:
                    r = client.post(
                        "/v1/chat/completions",
                        headers={"authorization": f"Bearer {self.key}"},
                        json={"model": "small", "messages": HI},
                    )
                except httpx.HTTPError as err:  # a hang or a dropped connection: recorded, never hidden
                    self.results.append((time.monotonic(), -1, "", {"code": type(err).__name__}))
                    continue
                error = r.json().get("error") or {} if r.status_code != 200 else {}
                self.results.append(
                    (time.monotonic(), r.status_code, r.headers.get("x-costgate-request-id", ""), error)
                )
                time.sleep(0.02)

    def since(self, t: float) -> list[tuple[float, int, str, dict]]:
        return [r for r in self.results if r[0] >= t]


@pytest.fixture(scope="module")
def own_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OwnRedis]:
    server = OwnRedis(tmp_path_factory.mktemp("redis"))
    yield server
    server.stop()


def budgeted_gateway(workdir: Path, upstream: FakeUpstream, redis_url: str, mode: str) -> GatewayProcess:
    return GatewayProcess(
        {
            "models": [model("small", "echo-small", upstream.url)],
            "redis_url": redis_url,
            "budgets": {
                "backend": "redis",
                "on_store_error": mode,
                "redis_timeout_s": 0.3,
                "redis_prefix": f"cg-{mode}:",
            },
            "rate_limits": {"team": {"requests_per_minute": 1_000_000}},
        },
        workdir,
    )


@pytest.mark.parametrize("mode", ["closed", "open"])
def test_redis_outage_fails_as_configured_and_recovers(
    tmp_path: Path, fake_upstream: FakeUpstream, own_redis: OwnRedis, mode: str
) -> None:
    gw = budgeted_gateway(tmp_path, fake_upstream, own_redis.url, mode)
    try:
        key = gw.new_key(f"redis-{mode}")
        team_id = next(t["id"] for t in gw.admin("GET", "/admin/teams").json()["data"] if t["name"] == f"redis-{mode}")
        put = gw.admin(
            "PUT", "/admin/budgets", json={"scope": "team", "id": team_id, "amount_usd": "100", "period": "monthly"}
        )
        assert put.status_code == 200, put.text
        with Load(gw, key) as load:
            wait_until(lambda: sum(1 for r in load.results if r[1] == 200) >= 5)
            own_redis.stop()
            down = time.monotonic()
            wait_until(lambda: len(load.since(down + 1.0)) >= 5)
            during = [r for r in load.since(down + 1.0)]
            own_redis.start()  # empty: counters are re-seeded from the ledger
            up = time.monotonic()
            wait_until(lambda: any(r[1] == 200 for r in load.since(up + 0.5)))
            back = time.monotonic()
            wait_until(lambda: len(load.since(back)) >= 5)
        statuses = Counter(r[1] for r in load.results)
        assert 500 not in statuses, statuses
        if mode == "closed":
            assert {r[1] for r in during} == {503}
            assert {r[3]["code"] for r in during} == {"budget_store_unavailable"}
        else:
            assert {r[1] for r in during} == {200}
        assert {r[1] for r in load.since(back)} == {200}  # recovered without a restart
        # Every answered request is in the ledger, and the budget's spend is counted again.
        answered = {r[2] for r in load.results if r[1] == 200}
        gw.spend()
        engine = sqlalchemy.create_engine(f"sqlite:///{tmp_path}/costgate.db")
        with engine.connect() as conn:
            ids = {row[0] for row in conn.execute(sqlalchemy.text("SELECT request_id FROM ledger"))}
        engine.dispose()
        assert answered <= ids
        view = gw.admin("GET", "/admin/budgets")
        assert view.status_code == 200, view.text
    finally:
        gw.stop()


async def postgres_ids(url: str) -> set[str]:
    conn = await asyncpg.connect(url)
    try:
        return {row[0] for row in await conn.fetch("SELECT request_id FROM ledger")}
    finally:
        await conn.close()


@pytest.fixture
def own_postgres() -> Iterator[OwnPostgres]:
    server = OwnPostgres()
    yield server
    server.destroy()


def test_postgres_outage_keeps_serving_known_keys_and_loses_no_ledger_row(
    tmp_path: Path, fake_upstream: FakeUpstream, own_postgres: OwnPostgres
) -> None:
    gw = GatewayProcess(
        {
            "models": [model("small", "echo-small", fake_upstream.url)],
            "database_url": own_postgres.url,
            "key_cache_ttl_s": 0.5,
        },
        tmp_path,
    )
    try:
        key = gw.new_key("pg-outage")
        with Load(gw, key) as load:
            wait_until(lambda: sum(1 for r in load.results if r[1] == 200) >= 5)
            own_postgres.stop()
            down = time.monotonic()
            wait_until(lambda: len(load.since(down + 1.0)) >= 10)  # past the key cache's TTL
            assert httpx.get(gw.url + "/readyz", timeout=10).status_code == 503
            unknown = httpx.post(
                gw.url + "/v1/chat/completions",
                timeout=10,
                headers={"authorization": "Bearer sk-cg-not-a-known-key"},
                json={"model": "small", "messages": HI},
            )
            own_postgres.start()
            up = time.monotonic()
            wait_until(lambda: httpx.get(gw.url + "/readyz").json().get("ledger_pending") == 0)
            wait_until(lambda: len(load.since(up + 1.0)) >= 5)
        statuses = Counter(r[1] for r in load.results)
        assert 500 not in statuses, statuses
        assert {r[1] for r in load.since(down + 1.0) if r[0] < up} == {200}  # known key: served from memory
        assert unknown.status_code == 503, unknown.text
        assert unknown.json()["error"]["type"] == "service_unavailable"
        assert {r[1] for r in load.since(up + 1.0)} == {200}
        answered = {r[2] for r in load.results if r[1] == 200}
        gw.spend()
        ids = asyncio.run(postgres_ids(own_postgres.url))
        missing = answered - ids
        assert not missing, f"{len(missing)} of {len(answered)} answered requests have no ledger row"
    finally:
        gw.stop()
