"""`RedisStore`: the budget and rate-limit counters shared by every replica, one Lua script
per call (lua/*.lua), so each admission and each settlement is one atomic round trip.

Keys (all under the configured prefix): `<counter>` hashes {spent, reserved} per budget and
period, `rl:<limit>:<subject>:<window>` rate windows, `hold:<id>` hashes and the `holds`
sorted set (by deadline) for reservations, `owners` (a sorted set of replicas by the end of
their lease) and `owned:<owner>` (the ids each one holds), `alerts:<counter>` hashes of fired
alerts. lua/holds.lua has the rules for releasing holds.
The scripts compute hold keys from the prefix, so the keys of one call must live on one node:
a single Redis (or one hash slot); Redis Cluster is not supported.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from importlib.resources import files
from typing import Any

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from gateway.storage.counters import Admission, CounterState, Lease, Outcome, Settlement, StoreUnavailable, Verdict
from gateway.storage.resp import Script, ScriptChannel

log = logging.getLogger("costgate.budgets")

HOLD_GRACE_S = 3600  # a hold's hash outlives its deadline by this much, for reclaim to find it


def _lua(name: str) -> str:
    return (files("gateway.storage") / "lua" / name).read_text()


class RedisStore:
    def __init__(self, url: str, prefix: str = "costgate:", timeout_s: float = 0.5, max_connections: int = 64) -> None:
        self.prefix = prefix
        # A blocking pool: a burst of requests queues for a connection instead of failing.
        pool = BlockingConnectionPool.from_url(
            url,
            max_connections=max_connections,
            timeout=timeout_s * 4,
            socket_timeout=timeout_s,
            socket_connect_timeout=timeout_s,
            retry=Retry(NoBackoff(), 1),
        )
        self._pool = pool
        self.redis = Redis(connection_pool=pool)
        holds = _lua("holds.lua")  # the shared prologue: how holds are released
        # admit and settle run on every request: over the lean pipelined channel (resp.py)
        self._fast = ScriptChannel(url, timeout_s)
        self._admit = Script((holds + _lua("admit.lua")).encode())
        self._settle = Script((holds + _lua("settle.lua")).encode())
        self._seed = self.redis.register_script(_lua("seed.lua"))
        self._reclaim = self.redis.register_script(holds + _lua("reclaim_only.lua"))
        self._retire = self.redis.register_script(holds + _lua("retire.lua"))
        self._checkpoint = self.redis.register_script(_lua("checkpoint.lua"))
        self._holds = prefix + "holds"

    async def _run(self, call: Any) -> Any:
        try:
            return await call
        except (RedisConnectionError, RedisTimeoutError, OSError) as err:
            raise StoreUnavailable(f"redis unreachable: {err}") from err
        except RedisError as err:
            # A script error or a read-only replica: the counters cannot be trusted either way.
            raise StoreUnavailable(f"redis error: {err}") from err

    async def admit(self, a: Admission) -> Verdict:
        p = self.prefix
        keys = [self._holds] + [p + b.counter for b in a.budgets]
        args: list[Any] = [
            p,
            repr(a.now),
            repr(a.deadline),
            a.reservation_id,
            str(a.want_pusd),
            len(a.budgets),
            len(a.rates),
            int(a.deadline - a.now) + HOLD_GRACE_S,
            a.lease.owner if a.lease else "",
            repr(a.lease.until if a.lease else a.now),
        ]
        args += [str(b.amount_pusd) for b in a.budgets]
        for r in a.rates:
            window = r.limit.window_s
            keys += [p + r.counter(a.now), p + r.counter(a.now, previous=True)]
            args += [r.maximum, r.amount, window, 1 if r.limit.sliding else 0, 2 * window + 60]
        args.append(a.checkpoint or "")
        reply = await self._run(self._fast.run(self._admit, keys, args))
        code = int(reply[0])
        if code == 0:
            return Verdict(Outcome.ADMITTED, used=tuple(int(u) for u in reply[1:]))
        if code == 1:
            return Verdict(Outcome.RATE_LIMITED, failed=int(reply[1]) - 1, retry_after_s=int(reply[2]))
        if code == 2:
            return Verdict(Outcome.OVER_BUDGET, failed=int(reply[1]) - 1)
        missing = tuple(_text(k)[len(p) :] for k in reply[1:])
        return Verdict(Outcome.UNINITIALIZED, missing=missing)

    async def settle(self, s: Settlement) -> list[int]:
        p = self.prefix
        keys = [self._holds] + [p + c for c in s.budgets] + [p + c for c, _ in s.spend_counters]
        keys += [p + r.counter for r in s.rates]
        args: list[Any] = [p, s.reservation_id, str(s.cost_pusd), len(s.budgets), len(s.spend_counters), len(s.rates)]
        args += [ttl for _, ttl in s.spend_counters] + [str(r.delta) for r in s.rates]
        reply = await self._run(self._fast.run(self._settle, keys, args))
        return [int(v) for v in reply]

    async def initialize(self, seeds: Mapping[str, tuple[int, int | None]]) -> None:
        if not seeds:
            return
        keys, args = [], []
        for counter, (spent, ttl) in seeds.items():
            keys.append(self.prefix + counter)
            args += [str(spent), "" if ttl is None else str(ttl)]
        await self._run(self._seed(keys=keys, args=args))

    async def read(self, counters: Sequence[str]) -> list[CounterState]:
        if not counters:
            return []
        pipe = self.redis.pipeline(transaction=False)
        for c in counters:
            pipe.hmget(self.prefix + c, "spent", "reserved")
        rows = await self._run(pipe.execute())
        return [CounterState(int(s or 0), int(r or 0), s is not None) for s, r in rows]

    async def reclaim(self, now: float) -> int:
        return int(await self._run(self._reclaim(keys=[self._holds], args=[self.prefix, repr(now)])))

    async def renew(self, lease: Lease) -> None:
        await self._run(self.redis.zadd(self.prefix + "owners", {lease.owner: lease.until}))

    async def retire(self, owner: str) -> int:
        return int(await self._run(self._retire(keys=[self._holds], args=[self.prefix, owner])))

    async def checkpoint(self, reservation_id: str, record: str) -> bool:
        key = self.prefix + "hold:" + reservation_id
        return bool(await self._run(self._checkpoint(keys=[key], args=[record])))

    async def stopped(self, limit: int) -> list[str]:
        popped = await self._run(self.redis.lpop(self.prefix + "stopped", limit))
        return [_text(v) for v in popped or ()]

    async def claim_alert(self, counter: str, label: str, now: float, ttl_s: int | None) -> bool:
        key = self.prefix + "alerts:" + counter
        new = await self._run(self.redis.hsetnx(key, label, repr(now)))
        if new and ttl_s is not None:
            await self._run(self.redis.expire(key, ttl_s))
        return bool(new)

    async def alert_state(self, counter: str) -> dict[str, float]:
        raw = await self._run(self.redis.hgetall(self.prefix + "alerts:" + counter))
        return {_text(k): float(v) for k, v in raw.items()}

    async def close(self) -> None:
        await self._fast.close()
        await self.redis.aclose()
        await self._pool.disconnect()


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
