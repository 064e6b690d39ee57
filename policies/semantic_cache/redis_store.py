"""The Redis backend, for many gateway replicas.

The Redis 7 here has no search module, so Redis cannot find a nearest vector itself. Design:
Redis holds the truth — each entry as a hash (its JSON and its float32 vector) that expires
with the entry's TTL, a per-team set (for purges) and a sorted set of keep scores (for the size
limit) — and every change is appended to a stream. Each replica keeps only the static vectors
in a local `VectorIndex` (~0.5 KB an entry), filled from Redis at start and kept in step by
tailing the stream; a lookup searches locally, then fetches the candidate entries and their
MiniLM vectors (`vec`, written when a replica first computed one) from Redis in one round trip,
so a replica never serves an entry that has expired or been purged, even if its index has not
caught up. (With RediSearch available, its vector index would replace the mirror.)
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from typing import Any

import numpy as np
import redis.asyncio as redis
from redis.exceptions import RedisError, WatchError

from policies.semantic_cache.index import VectorIndex
from policies.semantic_cache.served import ServedHit
from policies.semantic_cache.static_embedder import StaticEmbedder
from policies.semantic_cache.store import EVICT_FRACTION, Candidate, Entry, QuestionVectors, fair_eviction, keep_score

log = logging.getLogger("costgate.cache")
STREAM_MAXLEN = 200_000
# A MiniLM vector computed later is added only to an entry that still exists: a plain HSET on
# an expired or purged entry would bring back a hash with no TTL.
SET_IF_PRESENT = "if redis.call('exists', KEYS[1]) == 1 then return redis.call('hset', KEYS[1], 'vec', ARGV[1]) end"
FOLLOW_BLOCK_MS = 250  # how long the event follower blocks per read; stop() waits about this long


class RedisStore:
    def __init__(self, url: str, prefix: str, max_entries: int) -> None:
        # Any: redis-py types every reply as the union of all reply shapes; replies here are bytes
        # (decode_responses is off), and each read decodes what it takes.
        self.redis: Any = redis.Redis.from_url(url)
        self.prefix = prefix
        self.max_entries = max_entries
        self.indexes: dict[str, VectorIndex] = {}
        self._cursor = "0-0"
        self._tail: asyncio.Task[None] | None = None
        self._stopping = False
        self._set_full = self.redis.register_script(SET_IF_PRESENT)
        self._static: StaticEmbedder | None = None  # loaded only for entries written before `svec`

    def _k(self, *parts: str) -> str:
        return self.prefix + ":".join(parts)

    async def start(self) -> None:
        last = await self.redis.xrevrange(self._k("events"), count=1)
        self._cursor = last[0][0].decode() if last else "0-0"
        await self._order_teams()
        cursor = 0
        while True:  # the entries present now; the stream brings whatever changes after
            cursor, keys = await self.redis.scan(cursor, match=self._k("e", "*"), count=1000)
            if keys:
                await self._index_keys([k.decode().rsplit(":", 1)[1] for k in keys])
            if cursor == 0:
                break
        self._tail = asyncio.create_task(self._follow())

    async def stop(self) -> None:
        # The follower ends itself between two blocking reads: cancelling redis-py while it waits
        # in XREAD BLOCK now and then left the connection, and then stop(), hanging for good.
        self._stopping = True
        if self._tail is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._tail), FOLLOW_BLOCK_MS / 1000 * 4)
            except TimeoutError:
                self._tail.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._tail
        await self.redis.aclose()

    async def _index_keys(self, keys: list[str]) -> None:
        pipe = self.redis.pipeline(transaction=False)
        for key in keys:
            pipe.hmget(self._k("e", key), "ns", "svec", "vec", "entry")
        for key, (ns, svec, vec, raw) in zip(keys, await pipe.execute()):
            if ns is None or not vec and not svec:
                continue  # gone, or stored while the semantic cache was off
            if svec:
                static = np.frombuffer(svec, dtype=np.float32)
            else:  # written before static vectors existed: make it from the question
                if self._static is None:
                    self._static = StaticEmbedder.load()
                static = self._static.embed(json.loads(raw)["question"])
            self._index_add(ns.decode(), key, static)

    def _index_add(self, namespace: str, key: str, vector: np.ndarray) -> None:
        index = self.indexes.get(namespace)
        if index is None:
            index = self.indexes[namespace] = VectorIndex(len(vector))
        index.add(key, vector)

    def _index_remove(self, namespace: str, key: str) -> None:
        index = self.indexes.get(namespace)
        if index is not None and index.remove(key) and not len(index):
            del self.indexes[namespace]

    async def _follow(self) -> None:
        while not self._stopping:
            try:
                replies = await self.redis.xread({self._k("events"): self._cursor}, block=FOLLOW_BLOCK_MS, count=1000)
            except RedisError as err:
                log.warning("cache event stream: %s; retrying", err)
                await asyncio.sleep(1)
                continue
            for _, events in replies or ():
                added = []
                for event_id, fields in events:
                    self._cursor = event_id.decode()
                    op, key, ns = (fields[b"op"].decode(), fields[b"key"].decode(), fields[b"ns"].decode())
                    if op == "add":
                        added.append(key)
                    else:
                        self._index_remove(ns, key)
                if added:
                    await self._index_keys(added)

    async def get(self, key: str, now: float) -> Entry | None:
        raw = await self.redis.hget(self._k("e", key), "entry")
        entry = None if raw is None else Entry.from_json(json.loads(raw))
        return entry if entry is not None and entry.expires_at > now else None

    async def candidates(
        self, namespace: str, static: np.ndarray, now: float, k: int, floor: float = -1.0
    ) -> list[Candidate]:
        index = self.indexes.get(namespace)
        if index is None:
            return []
        found = index.search(static, k, floor)
        if not found:
            return []
        pipe = self.redis.pipeline(transaction=False)
        for key, _ in found:
            pipe.hmget(self._k("e", key), "entry", "vec")
        out = []
        for (key, score), (raw, vec) in zip(found, await pipe.execute()):
            entry = None if raw is None else Entry.from_json(json.loads(raw))
            if entry is None or entry.expires_at <= now:
                self._index_remove(namespace, key)  # expired in Redis: drop it here too
                continue
            out.append(Candidate(entry, score, np.frombuffer(vec, dtype=np.float32) if vec else None))
        return out

    async def remember_full(self, entry: Entry, full: np.ndarray) -> None:
        await self._set_full(keys=[self._k("e", entry.key)], args=[np.asarray(full, dtype=np.float32).tobytes()])

    async def put(self, entry: Entry, vectors: QuestionVectors | None) -> int:
        fields: dict[str, str | bytes] = {
            "entry": json.dumps(entry.to_json()),
            "ns": entry.namespace,
            "team": entry.team_id,
        }
        if vectors is not None:
            fields["svec"] = np.asarray(vectors.static, dtype=np.float32).tobytes()
            if vectors.full is not None:
                fields["vec"] = np.asarray(vectors.full, dtype=np.float32).tobytes()
        pipe = self.redis.pipeline(transaction=True)
        pipe.hset(self._k("e", entry.key), mapping=fields)
        pipe.pexpireat(self._k("e", entry.key), int(entry.expires_at * 1000))
        pipe.sadd(self._k("team", entry.team_id), entry.key)
        pipe.sadd(self._k("teams"), entry.team_id)  # the teams that have entries: eviction reads their orders
        score = keep_score(entry.last_used or entry.created_at, entry.hits)
        pipe.zadd(self._k("keep"), {entry.key: score})
        pipe.zadd(self._k("tkeep", entry.team_id), {entry.key: score})  # the team's own order, for eviction
        pipe.zadd(self._k("expiry"), {entry.key: entry.expires_at})
        pipe.xadd(
            self._k("events"),
            {"op": "add", "key": entry.key, "ns": entry.namespace},
            maxlen=STREAM_MAXLEN,
            approximate=True,
        )
        pipe.zcard(self._k("keep"))
        size = (await pipe.execute())[-1]
        if vectors is not None:
            self._index_add(entry.namespace, entry.key, np.asarray(vectors.static, dtype=np.float32))
        if size > self.max_entries:
            size -= await self._drop_expired(time.time())
        if size > self.max_entries:
            await self._evict(max(size - self.max_entries, int(self.max_entries * EVICT_FRACTION), 1))
            size = await self.count()
        return int(size)

    async def record_hit(self, entry: Entry, now: float, served: ServedHit | None = None) -> None:
        entry.hits += 1
        entry.last_used = now
        pipe = self.redis.pipeline(transaction=False)
        pipe.hset(self._k("e", entry.key), "entry", json.dumps(entry.to_json()))
        pipe.zadd(self._k("keep"), {entry.key: keep_score(now, entry.hits)}, xx=True)
        pipe.zadd(self._k("tkeep", entry.team_id), {entry.key: keep_score(now, entry.hits)}, xx=True)
        if served is not None:  # in the same round trip
            pipe.set(
                self._k("served", served.request_id), json.dumps(served.to_json()), pxat=int(served.expires_at * 1000)
            )
        await pipe.execute()

    async def served(self, request_id: str, now: float) -> ServedHit | None:
        raw = await self.redis.get(self._k("served", request_id))
        hit = None if raw is None else ServedHit.from_json(json.loads(raw))
        return hit if hit is not None and hit.expires_at > now else None

    async def remove(self, key: str, team_id: str, created_at: float) -> bool:
        """Checked and deleted in one transaction: if another replica stores a new answer under
        the key in between, the transaction fails and the new answer stays."""
        async with self.redis.pipeline(transaction=True) as pipe:
            await pipe.watch(self._k("e", key))
            raw, ns = await pipe.hmget(self._k("e", key), "entry", "ns")
            entry = None if raw is None else Entry.from_json(json.loads(raw))
            if entry is None or entry.team_id != team_id or entry.created_at != created_at:
                return False
            namespace = ns.decode() if ns else None
            pipe.multi()
            self._deletion(pipe, key, namespace, team_id)
            try:
                await pipe.execute()
            except WatchError:
                return False
        if namespace is not None:
            self._index_remove(namespace, key)
        return True

    def _deletion(self, pipe: redis.client.Pipeline, key: str, ns: str | None, team: str | None) -> None:
        """Queue an entry's removal everywhere: its hash, keep score, expiry, team set, and an event
        that takes it out of every replica's index."""
        pipe.delete(self._k("e", key))
        pipe.zrem(self._k("keep"), key)
        pipe.zrem(self._k("expiry"), key)
        if team is not None:
            pipe.srem(self._k("team", team), key)
            pipe.zrem(self._k("tkeep", team), key)
        if ns is not None:
            pipe.xadd(self._k("events"), {"op": "del", "key": key, "ns": ns}, maxlen=STREAM_MAXLEN, approximate=True)

    async def _delete(self, keys: list[str]) -> int:
        if not keys:
            return 0
        pipe = self.redis.pipeline(transaction=False)
        for key in keys:
            pipe.hmget(self._k("e", key), "ns", "team")
        found = await pipe.execute()
        pipe = self.redis.pipeline(transaction=True)
        removed = 0
        for key, (ns, team) in zip(keys, found):
            self._deletion(pipe, key, None if ns is None else ns.decode(), None if team is None else team.decode())
            if ns is not None:
                removed += 1
                self._index_remove(ns.decode(), key)
        await pipe.execute()
        return removed

    async def _drop_expired(self, now: float) -> int:
        """Redis expires an entry's hash by itself; its place in the keep score, expiry and team
        sets (and replicas' indexes) goes here, before they could count towards the size limit."""
        expired = [k.decode() for k in await self.redis.zrangebyscore(self._k("expiry"), 0, now, start=0, num=10_000)]
        if not expired:
            return 0
        pipe = self.redis.pipeline(transaction=True)
        pipe.zrem(self._k("keep"), *expired)
        pipe.zrem(self._k("expiry"), *expired)
        removed = (await pipe.execute())[0]
        for team in await self._teams():
            await self.redis.srem(self._k("team", team), *expired)
            await self.redis.zrem(self._k("tkeep", team), *expired)
        for namespace, index in list(self.indexes.items()):
            for key in expired:
                if key in index:
                    self._index_remove(namespace, key)
        return int(removed)

    async def _evict(self, n: int) -> None:
        """`n` entries go, taken from the teams that hold the most (`fair_eviction`), each team's
        lowest keep scores first (its own sorted set, popped)."""
        orders = [self._k("tkeep", team) for team in await self._teams()]
        pipe = self.redis.pipeline(transaction=False)
        for order in orders:
            pipe.zcard(order)
        sizes = dict(zip(orders, await pipe.execute()))
        for order, count in fair_eviction(sizes, n).items():
            await self._delete([key.decode() for key, _ in await self.redis.zpopmin(order, count)])

    async def _teams(self) -> list[str]:
        return [t.decode() for t in await self.redis.smembers(self._k("teams"))]

    async def _order_teams(self) -> None:
        """Give every team without one its own keep order and its place in the teams' set
        (entries stored before they existed), from the shared order: once, at start, not at
        each eviction (a scan reads the whole keyspace)."""
        async for team_key in self.redis.scan_iter(match=self._k("team", "*")):
            team = team_key.decode()[len(self._k("team", "")) :]
            await self.redis.sadd(self._k("teams"), team)
            if await self.redis.exists(self._k("tkeep", team)):
                continue
            members = [m.decode() for m in await self.redis.smembers(team_key)]
            scores = await self.redis.zmscore(self._k("keep"), members) if members else []
            ordered = {m: s for m, s in zip(members, scores) if s is not None}
            if ordered:
                await self.redis.zadd(self._k("tkeep", team), ordered)

    async def purge(self, team_id: str | None) -> int:
        if team_id is None:
            teams = [k.decode() async for k in self.redis.scan_iter(match=self._k("team", "*"))]
        else:
            teams = [self._k("team", team_id)]
        removed = 0
        for team_key in teams:
            members = [m.decode() for m in await self.redis.smembers(team_key)]
            removed += await self._delete(members)
            team = team_key[len(self._k("team", "")) :]
            await self.redis.delete(team_key, self._k("tkeep", team))
            await self.redis.srem(self._k("teams"), team)
        return removed

    async def count(self) -> int:
        return int(await self.redis.zcard(self._k("keep")))

    async def wait_synced(self, timeout: float = 5.0) -> None:
        """Until this replica's index has read every event written so far (tests, benchmarks)."""
        last = await self.redis.xrevrange(self._k("events"), count=1)
        target = last[0][0].decode() if last else "0-0"
        deadline = time.monotonic() + timeout
        while _stream_id(self._cursor) < _stream_id(target) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)


def _stream_id(value: str) -> tuple[int, int]:
    ms, _, seq = value.partition("-")
    return int(ms), int(seq or 0)
