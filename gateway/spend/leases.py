"""This replica's identity and its lease on the budget holds it makes.

A replica (one gateway process) is `<host>-<pid>-<random>` for its lifetime; a restarted
process is a new replica. Every hold it makes records it as owner, and it renews a lease of
`budgets.lease_s` seconds in the counter store every `lease_s / 3` (at most every second),
running `reclaim` at the same time: so the holds of a replica that died — SIGKILL, an OOM kill,
a lost node — are released by whichever replica ticks first after its lease ends, within
about `lease_s` plus a tick. A replica that stops cleanly retires its lease at once.
gateway/storage/counters.py has the store's side; docs/reliability.md the whole story.
"""

from __future__ import annotations

import os
import secrets
import socket

from gateway.spend.budget_metrics import BudgetMetrics
from gateway.storage.counters import BudgetStore, Lease
from policies.budgets import Clock


def replica_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(4)}"


class Leaseholder:
    def __init__(self, store: BudgetStore, lease_s: float, metrics: BudgetMetrics, clock: Clock) -> None:
        self.owner = replica_id()
        self.store = store
        self.lease_s = lease_s
        self.metrics = metrics
        self.clock = clock

    @property
    def tick_s(self) -> float:
        """How often `tick` runs: three renewals per lease, so one lost renewal loses nothing."""
        return min(1.0, self.lease_s / 3)

    def lease(self, now: float) -> Lease:
        return Lease(self.owner, now + self.lease_s)

    async def tick(self) -> int:
        """Renew this replica's lease, then release the holds of the dead; returns how many.
        Raises StoreUnavailable when the store cannot be reached."""
        now = self.clock()
        await self.store.renew(self.lease(now))
        reclaimed = await self.store.reclaim(now)
        if reclaimed:
            self.metrics.reclaimed.inc(reclaimed)
        return reclaimed

    async def retire(self) -> int:
        return await self.store.retire(self.owner)
