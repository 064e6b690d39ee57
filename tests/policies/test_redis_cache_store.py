"""The Redis backend against the real server at 127.0.0.1:6379: two stores stand for two
gateway replicas sharing one cache. Each test uses its own key prefix and deletes only it."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import AsyncIterator

import numpy as np
import pytest
import redis.asyncio as redis

from policies.exact_cache import CachedAnswer
from policies.semantic_cache.embedder import DIM
from policies.semantic_cache.redis_store import RedisStore
from policies.semantic_cache.store import Entry, QuestionVectors

pytestmark = pytest.mark.slow  # boots processes: not in the fast lane

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
    return Entry(
        key,
        team,
        ns,
        "q " + key,
        CachedAnswer("a " + key, "stop", "m", "small", 2, 3),
        now,
        now + ttl,
        last_used=now if last_used is None else last_used,
    )


async def test_a_second_replica_sees_entries_and_purges(prefix: str) -> None:
    one, two = RedisStore(URL, prefix, 100), RedisStore(URL, prefix, 100)
    await one.put(entry("before"), QuestionVectors(unit(0)))  # stored before the second replica started
    await one.start()
    await two.start()
    try:
        await one.put(entry("after"), QuestionVectors(unit(1)))
        await one.put(entry("other-team", team="t2", ns="ns2"), QuestionVectors(unit(2)))
        await two.wait_synced()
        now = time.time()
        (found,) = await two.candidates("ns", unit(1), now, 1)
        assert found.entry.key == "after" and found.entry.answer.text == "a after"
        assert found.static_cosine == pytest.approx(1, abs=1e-5) and found.full is None
        await one.remember_full(found.entry, unit(7))  # one replica made its MiniLM vector: all see it
        assert np.array_equal((await two.candidates("ns", unit(1), now, 1))[0].full, unit(7))
        assert (await two.candidates("ns", unit(0), now, 1))[0].entry.key == "before"
        assert (await two.get("before", now)).question == "q before"
        assert (
            await two.candidates("ns", unit(2), now, 1) == []
            or (await two.candidates("ns", unit(2), now, 1))[0].entry.key != "other-team"
        )
        assert await two.purge("t1") == 2
        assert await one.get("after", now) is None
        await one.wait_synced()
        assert await one.candidates("ns", unit(1), now, 1) == []
        assert (await one.candidates("ns2", unit(2), now, 1))[0].entry.key == "other-team"
        assert await one.count() == 1
    finally:
        await one.stop()
        await two.stop()


async def test_ttl_hits_and_eviction(prefix: str) -> None:
    store = RedisStore(URL, prefix, max_entries=3)
    await store.start()
    try:
        await store.put(entry("gone", ttl=-1), QuestionVectors(unit(9)))  # already expired: Redis drops it at once
        now = time.time()
        assert await store.get("gone", now) is None
        assert await store.candidates("ns", unit(9), now, 1) == []
        for i, key in enumerate(("a", "b", "c")):
            await store.put(entry(key, last_used=now - 1000 + i), QuestionVectors(unit(10 + i)))
        hot = await store.get("a", now)
        for _ in range(15):  # "a" is the oldest but hit often: worth keeping
            await store.record_hit(hot, now - 1000)
        assert await store.put(entry("d"), QuestionVectors(unit(20))) == 3  # the count after evicting
        assert await store.count() == 3
        assert await store.get("b", now) is None  # least recently used, never hit: evicted
        assert await store.get("a", now) is not None and (await store.get("a", now)).hits == 15
        assert (
            await store.candidates("ns", unit(11), now, 1) == []
            or (await store.candidates("ns", unit(11), now, 1))[0].entry.key != "b"
        )
    finally:
        await store.stop()


async def stored_by_an_older_release(prefix: str, team: str, last_used: list[float]) -> None:
    """Entries of `team` as a release without the teams' own keep orders (and their set) left them."""
    before = RedisStore(URL, prefix, max_entries=len(last_used))
    await before.start()
    for i, used in enumerate(last_used):
        await before.put(entry(f"{team}{i}", team=team, last_used=used), QuestionVectors(unit(i)))
    await before.redis.delete(before._k("tkeep", team), before._k("teams"))
    await before.stop()


async def test_a_team_flooding_a_shared_cache_evicts_its_own_entries_not_anothers(prefix: str) -> None:
    now = time.time()
    # Old and never hit: the first to go under one shared recency order.
    await stored_by_an_older_release(prefix, "quiet", [now - 10_000, now - 9_999])
    store = RedisStore(URL, prefix, max_entries=6)
    await store.start()  # gives the team its order again
    try:
        for i in range(12):
            await store.put(entry(f"noisy{i}", team="noisy", last_used=now + i), QuestionVectors(unit(100 + i)))
        assert await store.count() <= 6
        assert None not in [await store.get(f"quiet{i}", now) for i in range(2)]
        assert await store.get("noisy11", now) is not None and await store.get("noisy0", now) is None
    finally:
        await store.stop()


async def test_entries_stored_before_the_teams_orders_are_evicted_fairly_too(prefix: str) -> None:
    now = time.time()
    await stored_by_an_older_release(prefix, "old", [now - 100 + i for i in range(6)])
    store = RedisStore(URL, prefix, max_entries=6)
    await store.start()
    try:
        for i in range(3):  # newer, but a smaller holding: the older team's entries make room
            await store.put(entry(f"new{i}", team="new", last_used=now - 1000 + i), QuestionVectors(unit(50 + i)))
        assert await store.count() <= 6
        assert None not in [await store.get(f"new{i}", now) for i in range(3)]
    finally:
        await store.stop()


async def test_a_later_minilm_vector_never_revives_a_purged_entry(prefix: str) -> None:
    store = RedisStore(URL, prefix, max_entries=10)
    await store.start()
    try:
        await store.put(entry("x"), QuestionVectors(unit(1)))
        stale = await store.get("x", time.time())
        assert await store.purge("t1") == 1
        await store.remember_full(stale, unit(2))  # a lookup that began before the purge ends after it
        assert await store.redis.exists(prefix + "e:x") == 0
    finally:
        await store.stop()


async def test_entries_written_before_static_vectors_are_indexed_from_their_question(prefix: str) -> None:
    from policies.semantic_cache.static_embedder import StaticEmbedder

    old = entry("legacy")
    client = redis.Redis.from_url(URL)  # as the previous release wrote it: the MiniLM vector only
    await client.hset(
        prefix + "e:legacy",
        mapping={"entry": json.dumps(old.to_json()), "ns": "ns", "team": "t1", "vec": unit(3).tobytes()},
    )
    await client.aclose()
    store = RedisStore(URL, prefix, max_entries=10)
    await store.start()
    try:
        (found,) = await store.candidates("ns", StaticEmbedder.load().embed(old.question), time.time(), 1)
        assert found.entry.key == "legacy" and found.static_cosine == pytest.approx(1, abs=1e-5)
        assert np.array_equal(found.full, unit(3))
    finally:
        await store.stop()
