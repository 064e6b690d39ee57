"""How many wrong admin keys the dashboard's sign-in takes before it stops trying.

Failed attempts are counted over a sliding window, per client address and over all
addresses. Past either limit, sign-in answers 429 with a retry-after until the oldest failure
counted leaves the window — even for the right key, or a guesser would learn it was right.
The overall limit bounds guessing spread over many addresses, and also how many addresses
are remembered (at most `overall` per window). It can lock the dashboard for everyone for a
window: the admin API, with its bearer key, stays open. The counts are per replica.
"""

from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import dataclass, field

from policies.budgets import Clock


@dataclass(slots=True)
class LoginLimiter:
    per_address: int
    overall: int
    window_s: float
    clock: Clock = time.monotonic
    _by_address: dict[str, deque[float]] = field(default_factory=dict)
    _all: deque[float] = field(default_factory=deque)

    def retry_after(self, address: str) -> int | None:
        """Seconds until `address` may try again; None: it may now."""
        now = self.clock()
        self._forget_before(now - self.window_s)
        waits = [
            math.ceil(q[0] + self.window_s - now)
            for q, limit in ((self._by_address.get(address), self.per_address), (self._all, self.overall))
            if q is not None and len(q) >= limit
        ]
        return max(1, *waits) if waits else None

    def failed(self, address: str) -> None:
        now = self.clock()
        self._by_address.setdefault(address, deque()).append(now)
        self._all.append(now)

    def succeeded(self, address: str) -> None:
        self._by_address.pop(address, None)

    def _forget_before(self, cutoff: float) -> None:
        while self._all and self._all[0] <= cutoff:
            self._all.popleft()
        for address in [a for a, q in self._by_address.items() if q[-1] <= cutoff]:
            del self._by_address[address]
        for q in self._by_address.values():
            while q[0] <= cutoff:
                q.popleft()
