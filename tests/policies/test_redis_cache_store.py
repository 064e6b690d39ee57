"""The Redis backend against the real server at 127.0.0.1:6379: two stores stand for two
gateway replicas sharing one cache. Each test uses its own key prefix and deletes only it."""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncIterator

import numpy as np
import pytest
import redis.asyncio as redis

from policies.exact_cache import CachedAnswer
from policies.semantic_cache.embedder import DIM
from policies.semantic_cache.redis_store import RedisStore
from policies.semantic_cache.store import Entry

URL = "redis://127.0.0.1:6379/0"


@pytest.fixture
async def prefix() -> AsyncIterator[str]:
    name = f"costgate-test-{secrets.token_hex(6)}:"
    yield name
    client = redis.Redis.from_url(URL)
    keys = [k async for k in client.scan_iter(match=name + "*")]
    if keys:
        await client.delete(*keys)
    await client.aclose()


def unit(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def entry(key: str, team: str = "t1", ns: str = "ns", ttl: float = 3600.0, last_used: float | None = None) -> Entry:
    now = time.time()
    return Entry(key, team, ns, "q " + key, CachedAnswer("a " + key, "stop", "m", "small", 2, 3), now, now + ttl,
                 last_used=now if last_used is None else last_used)


async def test_a_second_replica_sees_entries_and_purges(prefix: str) -> None:
    one, two = RedisStore(URL, prefix, 100), RedisStore(URL, prefix, 100)
    await one.put(entry("before"), unit(0))  # stored before the second replica started
    await one.start()
    await two.start()
    try:
        await one.put(entry("after"), unit(1))
        await one.put(entry("other-team", team="t2", ns="ns2"), unit(2))
        await two.wait_synced()
        now = time.time()
        (found, score), = await two.nearest("ns", unit(1), now)
        assert found.key == "after" and found.answer.text == "a after" and score == pytest.approx(1, abs=1e-5)
        assert (await two.nearest("ns", unit(0), now))[0][0].key == "before"
        assert (await two.get("before", now)).question == "q before"
        assert await two.nearest("ns", unit(2), now) == [] or (await two.nearest("ns", unit(2), now))[0][0].key != "other-team"
        assert await two.purge("t1") == 2
        assert await one.get("after", now) is None
        await one.wait_synced()
        assert await one.nearest("ns", unit(1), now) == []
        assert (await one.nearest("ns2", unit(2), now))[0][0].key == "other-team"
        assert await one.count() == 1
    finally:
        await one.stop()
        await two.stop()


async def test_ttl_hits_and_eviction(prefix: str) -> None:
    store = RedisStore(URL, prefix, max_entries=3)
    await store.start()
    try:
        await store.put(entry("gone", ttl=-1), unit(9))  # already expired: Redis drops it at once
        now = time.time()
        assert await store.get("gone", now) is None
        assert await store.nearest("ns", unit(9), now) == []
        for i, key in enumerate(("a", "b", "c")):
            await store.put(entry(key, last_used=now - 1000 + i), unit(10 + i))
        hot = await store.get("a", now)
        for _ in range(15):  # "a" is the oldest but hit often: worth keeping
            await store.record_hit(hot, now - 1000)
        await store.put(entry("d"), unit(20))
        assert await store.count() == 3
        assert await store.get("b", now) is None  # least recently used, never hit: evicted
        assert await store.get("a", now) is not None and (await store.get("a", now)).hits == 15
        assert await store.nearest("ns", unit(11), now) == [] or \
            (await store.nearest("ns", unit(11), now))[0][0].key != "b"
    finally:
        await store.stop()
