"""Priority classes and admission across the replicas of one model: pure bookkeeping.

No torch, no vLLM, no asyncio: counts of outstanding tokens per replica and per class, and the
rules that read them. `gateway.providers.replicas` drives it from the request path.

Classes (the value is what vLLM's `priority` field gets; lower runs earlier under vLLM's
`--scheduling-policy priority`):

    REALTIME     -1   a person is waiting on every token
    INTERACTIVE   0   the default; also vLLM's default, so a vLLM without priority
                      scheduling still accepts it
    BATCH         1   only idle capacity: the Batch API's lines, and free keys by default

Invariants of `LoadBook`:
- a replica's outstanding tokens are the sum of its admitted, unreleased tickets
  (each ticket weighs prompt tokens + the most output tokens the request may produce);
- a BATCH ticket is admitted only while foreground (realtime + interactive) load per live
  replica is at most `batch_idle_tokens`, and batch load stays within `batch_max_tokens` per
  live replica (a lone batch request is always admitted when the foreground is idle enough,
  however large, so no request waits forever on the cap);
- foreground tickets are never held back here: they queue inside the replica, where vLLM
  orders them by priority.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class Priority(enum.IntEnum):
    REALTIME = -1
    INTERACTIVE = 0
    BATCH = 1

    @property
    def label(self) -> str:
        return self.name.lower()


# What a key gets when it asks for nothing, and the most it may ask for. Free keys fill idle
# capacity by default (they never displace paying traffic) and may ask for interactive;
# only paid plans may ask for realtime. Asking for a lower class is always allowed.
PLAN_DEFAULT: dict[str, Priority] = {
    "free": Priority.BATCH,
    "pro": Priority.INTERACTIVE,
    "enterprise": Priority.INTERACTIVE,
}
PLAN_CEILING: dict[str, Priority] = {
    "free": Priority.INTERACTIVE,
    "pro": Priority.REALTIME,
    "enterprise": Priority.REALTIME,
}


def parse_priority(value: str) -> Priority:
    """`realtime` | `interactive` | `batch` (case-insensitive); ValueError otherwise."""
    try:
        return Priority[value.strip().upper()]
    except KeyError:
        raise ValueError(f"unknown priority {value!r}: use realtime, interactive or batch") from None


def resolve_priority(asked: str | None, plan: str) -> Priority:
    """The class a request runs in: what it asked for, capped by its plan's ceiling; else the
    plan's default. Unknown plans are treated like `pro`."""
    default = PLAN_DEFAULT.get(plan, Priority.INTERACTIVE)
    if asked is None or not asked.strip():
        return default
    wanted = parse_priority(asked)
    ceiling = PLAN_CEILING.get(plan, Priority.REALTIME)
    return max(wanted, ceiling)  # a larger value is a lower class


@dataclass(frozen=True, slots=True)
class AdmissionPolicy:
    batch_idle_tokens: int = 0  # batch may start while foreground load per live replica <= this
    batch_max_tokens: int | None = 16_384  # batch load per live replica; None: no cap
    cooldown_s: float = 5.0  # a replica that failed to connect is skipped this long


@dataclass(frozen=True, slots=True)
class Ticket:
    replica: int
    priority: Priority
    tokens: int


@dataclass(slots=True)
class ReplicaLoad:
    name: str
    outstanding: dict[Priority, int] = field(default_factory=lambda: {p: 0 for p in Priority})
    down_until: float | None = None

    @property
    def tokens(self) -> int:
        return sum(self.outstanding.values())

    def live(self, now: float) -> bool:
        return self.down_until is None or now >= self.down_until


class LoadBook:
    """Outstanding tokens per replica and class; which replica a request goes to; whether a
    batch request may start now."""

    def __init__(self, names: list[str], policy: AdmissionPolicy) -> None:
        if not names:
            raise ValueError("a replica set needs at least one replica")
        self.replicas = [ReplicaLoad(n) for n in names]
        self.policy = policy

    def load(self, *classes: Priority) -> int:
        return sum(r.outstanding[p] for r in self.replicas for p in classes)

    def live_count(self, now: float) -> int:
        return sum(r.live(now) for r in self.replicas)

    def may_admit(self, priority: Priority, tokens: int, now: float) -> bool:
        if priority is not Priority.BATCH:
            return True
        n = max(1, self.live_count(now))
        if self.load(Priority.REALTIME, Priority.INTERACTIVE) > self.policy.batch_idle_tokens * n:
            return False
        cap, batch = self.policy.batch_max_tokens, self.load(Priority.BATCH)
        return cap is None or batch == 0 or batch + tokens <= cap * n

    def choose(self, now: float, exclude: frozenset[int] = frozenset()) -> int | None:
        """The live replica with the fewest outstanding tokens (ties: the first). When every
        untried replica is marked down, the one that comes back soonest: it may be up again,
        and trying it beats losing the request. None when every replica was tried."""
        untried = [i for i in range(len(self.replicas)) if i not in exclude]
        if not untried:
            return None
        live = [i for i in untried if self.replicas[i].live(now)]
        if live:
            return min(live, key=lambda i: self.replicas[i].tokens)
        return min(untried, key=lambda i: self.replicas[i].down_until or 0.0)

    def admit(self, replica: int, priority: Priority, tokens: int) -> Ticket:
        self.replicas[replica].outstanding[priority] += tokens
        return Ticket(replica, priority, tokens)

    def release(self, ticket: Ticket) -> None:
        load = self.replicas[ticket.replica].outstanding
        if load[ticket.priority] < ticket.tokens:
            raise ValueError(f"released more than admitted: {ticket}")
        load[ticket.priority] -= ticket.tokens

    def mark_down(self, replica: int, now: float) -> None:
        self.replicas[replica].down_until = now + self.policy.cooldown_s

    def mark_up(self, replica: int) -> None:
        self.replicas[replica].down_until = None
