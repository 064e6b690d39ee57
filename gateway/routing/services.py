"""What a cascade is built with and counts, shared by its request path
(gateway/routing/cascade.py) and its sampling (gateway/routing/sampling.py)."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Protocol

from starlette.responses import Response

from gateway.context import RequestContext
from gateway.metrics import Metrics
from gateway.routing.confidence import Embed
from gateway.routing.metrics import PolicyMetrics
from gateway.storage.cascade_samples import SampleStore
from policies.breaker import Breakers
from policies.quality import Sample


class SideLane(Protocol):
    """The side pipeline (gateway/pipeline.py `build_side_stages`): records a side request and
    holds its worst case against the budgets it hits, then runs its `side_call`."""

    async def handle(self, ctx: RequestContext) -> Response: ...


class Learner(Protocol):
    """Refits a cascade's scorer from its samples (gateway/routing/learning.py)."""

    def sampled(self, request_id: str, sample: Sample, vectors: tuple[tuple[float, ...], ...]) -> None:
        """A new sample was taken and stored (with each cheap answer's feature vector)."""
        ...

    async def load(self) -> None:
        """At start: the scorer a previous run refitted, and the stored samples rescored by it."""
        ...


@dataclass(frozen=True, slots=True)
class Services:
    """What every cascade shares with the rest of the gateway."""

    breakers: Breakers
    side_lane: SideLane
    metrics: Metrics
    policy_metrics: PolicyMetrics
    store: SampleStore
    log_prompts: bool = False
    embed: Embed | None = None  # the queries' MiniLM vectors, for their topic; None: taken as the mean


@dataclass(slots=True)
class Tally:
    """What a cascade did since this gateway started (each replica counts its own), for
    /admin/cascades: the requests it answered, how many the last tier answered, what they were
    charged, what the last tier alone would have charged them, and what the shadow samples cost.

    For a request the last tier answered, "the last tier alone" is that call's own cost; for one
    a cheaper tier answered, the last tier's price for the same tokens (the cheap answer's prompt
    and completion: an estimate, as the last tier's answer was never asked for)."""

    answered: int = 0
    escalated: int = 0
    charged: Decimal = Decimal(0)
    always_last: Decimal = Decimal(0)
    shadow: Decimal = Decimal(0)

    @property
    def saved(self) -> Decimal:
        """Against sending every request to the last tier: every cheap attempt, judge and shadow
        call paid for."""
        return self.always_last - self.charged - self.shadow

    @property
    def escalation_rate(self) -> float | None:
        return self.escalated / self.answered if self.answered else None

    def count(self, ctx: RequestContext, escalated: bool, always_last: Decimal) -> None:
        if ctx.error is not None or ctx.status_code >= 400:
            return
        self.answered += 1
        self.escalated += escalated
        self.charged += ctx.cost
        self.always_last += always_last
