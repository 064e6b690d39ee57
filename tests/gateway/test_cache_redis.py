"""Two gateway replicas sharing one Redis-backed cache (the real server at 127.0.0.1:6379),
under a key prefix of this module's own, deleted afterwards. Their config names no cache
backend: a `redis_url` is enough for replicas to share the cache."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import openai
import pytest
import redis

from tests.conftest import standard_models
from tests.support import FakeUpstream, GatewayProcess, wait_until

pytestmark = pytest.mark.slow  # boots processes: not in the fast lane

REDIS = "redis://127.0.0.1:6379/0"


@pytest.fixture(scope="module")
def replicas(tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream) -> Iterator[list[GatewayProcess]]:
    prefix = f"costgate-test-{secrets.token_hex(6)}:"
    root = tmp_path_factory.mktemp("cache-redis")
    config = {
        "models": standard_models(fake_upstream.url),
        "redis_url": REDIS,
        "database_url": f"sqlite:///{root}/shared.db",
        "cache": {"redis_prefix": prefix, "teams": {"shared": {"semantic": True, "max_false_hit_rate": 0.25}}},
    }
    first = GatewayProcess(config, root / "a")
    second = GatewayProcess(config, root / "b")
    yield [first, second]
    first.stop()
    second.stop()
    client = redis.Redis.from_url(REDIS)
    keys = list(client.scan_iter(match=prefix + "*"))
    if keys:
        client.delete(*keys)
    client.close()


def ask(gw: GatewayProcess, key: str, text: str):
    raw = gw.client(key).chat.completions.with_raw_response.create(
        model="small", temperature=0, messages=[{"role": "user", "content": text}]
    )
    return raw.headers["x-costgate-cache"], raw.parse().choices[0].message.content


def test_replicas_share_exact_and_semantic_entries(replicas) -> None:
    one, two = replicas
    assert [gw.admin("GET", "/admin/cache").json()["backend"] for gw in replicas] == ["redis", "redis"]
    key = one.new_key("shared")
    status, stored = ask(one, key, "How do I learn Python quickly?")
    assert status == "miss"
    assert ask(two, key, "How do I learn Python quickly?") == ("exact", stored)
    # the second replica's index learns the vector from the event stream
    wait_until(lambda: ask(two, key, "How can I learn Python quickly?")[0] == "semantic", timeout=5, interval=0.05)
    assert ask(two, key, "How can I learn Python quickly?")[1] == stored
    other = one.new_key("elsewhere")
    assert ask(two, other, "How do I learn Python quickly?")[0] == "miss"


def test_purge_on_one_replica_empties_both(replicas) -> None:
    one, two = replicas
    key = one.new_key("shared")
    ask(one, key, "purge across replicas")
    assert ask(two, key, "purge across replicas")[0] == "exact"
    response = two.admin("DELETE", "/admin/cache?team=shared")
    assert response.status_code == 200 and response.json()["removed"] >= 1
    assert ask(one, key, "purge across replicas")[0] == "miss"


def test_a_hit_reported_wrong_on_one_replica_is_purged_for_both(replicas) -> None:
    one, two = replicas
    key = one.new_key("shared")
    ask(one, key, "What is the fastest way to learn Go?")
    wait_until(lambda: ask(two, key, "What's the fastest way to learn Go?")[0] == "semantic", timeout=5, interval=0.05)
    raw = two.client(key).chat.completions.with_raw_response.create(
        model="small", temperature=0, messages=[{"role": "user", "content": "What's the fastest way to learn Go?"}]
    )
    assert raw.headers["x-costgate-cache"] == "semantic"

    def report() -> dict | None:
        try:
            return one.client(key).post(
                "/feedback",
                cast_to=object,  # reported to the replica that did not serve it
                body={"request_id": raw.headers["x-costgate-request-id"], "verdict": "wrong"},
            )
        except openai.NotFoundError:  # the serving replica's ledger row is still queued (<= 50 ms)
            return None

    reply = wait_until(report, timeout=10, what="the request in the shared ledger")
    assert (reply["cache"], reply["purged"], reply["labelled"]) == ("semantic", True, True)
    # the replica that served it has no such entry left (asked again, its answer would be stored anew)
    assert ask(two, key, "What is the fastest way to learn Go?")[0] == "miss"
