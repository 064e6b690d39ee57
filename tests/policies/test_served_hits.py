"""What a hit served, kept for feedback, and removing exactly the entry that served it: the
embedded backend, and the Redis one (the real server at 127.0.0.1:6379, two stores standing
for two replicas, under a key prefix of the test's own)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from policies.semantic_cache.redis_store import RedisStore
from policies.semantic_cache.served import ServedHit, ServedHits
from policies.semantic_cache.store import EmbeddedStore, Entry, QuestionVectors
from tests.policies.test_redis_cache_store import URL, entry, prefix, unit  # noqa: F401 (prefix: a fixture)


def served(e: Entry, request_id: str = "req_1", ttl: float = 60.0, query: str | None = "q?") -> ServedHit:
    return ServedHit(request_id, e.team_id, "semantic", e.key, e.created_at, time.time() + ttl, query, e.question, 0.97)


def test_records_expire_and_the_oldest_go_first_past_the_limit() -> None:
    hits = ServedHits(limit=2)
    now = time.time()
    for i in range(3):
        hits.add(ServedHit(f"req_{i}", "t", "exact", f"k{i}", now, now + 10))
    assert hits.get("req_0", now) is None and hits.get("req_2", now) is not None
    assert hits.get("req_1", now + 10) is None  # expired


@pytest.mark.parametrize("replicas", ["embedded", "redis"])
async def test_remove_takes_only_the_teams_entry_that_served(replicas: str, prefix: str) -> None:  # noqa: F811
    if replicas == "embedded":
        one = two = EmbeddedStore(100)
    else:
        one, two = RedisStore(URL, prefix, 100), RedisStore(URL, prefix, 100)
    await one.start()
    if two is not one:
        await two.start()
    try:
        old = entry("k")
        await one.put(old, QuestionVectors(unit(0)))
        record = served(old)
        await one.record_hit(old, time.time(), record)
        assert await two.served("req_1", time.time()) == record  # the other replica finds it
        assert not await two.remove(old.key, "another-team", old.created_at)  # not that team's
        newer = Entry(old.key, old.team_id, old.namespace, old.question, old.answer, old.created_at + 1, old.expires_at)
        await one.put(newer, QuestionVectors(unit(0)))  # answered afresh under the same key
        assert not await two.remove(old.key, old.team_id, old.created_at)  # the stale report keeps it
        assert await two.get(old.key, time.time()) is not None
        assert await two.remove(old.key, old.team_id, newer.created_at)
        assert await one.get(old.key, time.time()) is None and await one.count() == 0
        if isinstance(one, RedisStore):
            await one.wait_synced()
        assert await one.candidates("ns", unit(0), time.time(), 4) == []  # gone from every index
        assert await two.served("req_2", time.time()) is None
    finally:
        await one.stop()
        if two is not one:
            await two.stop()


async def test_redis_records_expire_with_their_window(prefix: str) -> None:  # noqa: F811
    store = RedisStore(URL, prefix, 100)
    await store.start()
    try:
        e = entry("k")
        await store.put(e, QuestionVectors(unit(0)))
        await store.record_hit(e, time.time(), served(e, ttl=30))
        ttl_ms = await store.redis.pttl(prefix + "served:req_1")
        assert 0 < ttl_ms <= 30_000
        assert await store.served("req_1", time.time() + 31) is None
        assert np.isclose((await store.candidates("ns", unit(0), time.time(), 1))[0].static_cosine, 1, atol=1e-5)
    finally:
        await store.stop()
