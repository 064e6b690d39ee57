"""What a cascade is built with, decides by and counts, shared by its request path
(gateway/routing/cascade.py), its sampling (gateway/routing/sampling.py) and its learning
(gateway/routing/learning.py).

The data flows one way: learning writes a new `CascadeState` into the cascade's `StateSlot`;
the request path and the sampling read the slot; none of them holds or changes another's fields."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Protocol

from starlette.responses import Response

from gateway.core.context import RequestContext, SideCall
from gateway.metrics import Metrics
from gateway.routing.cascade_metrics import PolicyMetrics
from gateway.routing.confidence import Confidence, Embed
from gateway.routing.guarded_call import Upstream
from gateway.storage.cascade_samples import SampleStore
from policies.precall import PrecallRouter
from policies.quality import Sample
from policies.quality_controller import QualityController


class SideLane(Protocol):
    """The side pipeline (gateway/pipeline.py `SideLane`): records a side request and holds
    `call`'s worst case against the budgets it hits, then runs `call`."""

    async def handle(self, ctx: RequestContext, call: SideCall) -> Response: ...


class Learner(Protocol):
    """Refits a cascade's scorer from its samples (gateway/routing/learning.py)."""

    def sampled(self, request_id: str, sample: Sample, vectors: tuple[tuple[float, ...], ...]) -> None:
        """A new sample was taken and stored (with each cheap answer's feature vector)."""
        ...

    async def load(self) -> None:
        """At start: the scorer a previous run refitted, and the stored samples rescored by it."""
        ...


@dataclass(frozen=True, slots=True)
class CascadeState:
    """What a cascade decides by, as one value: the scorer that rates a cheap answer, the quality
    controller built on that scorer's calibration (its threshold is on that scorer's scale), and
    the router before the call trained at that threshold. A request reads one `CascadeState` and
    keeps it, so it never scores with one scorer and judges by another's threshold."""

    scorer: Confidence
    controller: QualityController
    router: PrecallRouter | None = None  # policies/precall.py; None: every request asks the cheap tier


class StateSlot:
    """The one place a cascade's `CascadeState` lives. Its learning (its only writer) replaces the
    whole value; the request path and the sampling read `current` (a request once, at its start)."""

    __slots__ = ("_current",)

    def __init__(self, initial: CascadeState) -> None:
        self._current = initial

    @property
    def current(self) -> CascadeState:
        return self._current

    def replace(self, state: CascadeState) -> None:
        """`state` from now on: the requests that start next read it; those under way keep theirs."""
        self._current = state


@dataclass(frozen=True, slots=True)
class Services:
    """What every cascade shares with the rest of the gateway."""

    upstream: Upstream  # every call a cascade makes, guarded (tiers, judge, shadow samples)
    side_lane: SideLane
    metrics: Metrics
    policy_metrics: PolicyMetrics
    store: SampleStore
    log_prompts: bool = False
    embed: Embed | None = None  # the queries' MiniLM vectors, for their topic; None: taken as the mean


MAX_CURVE_POINTS = 400


def on_curve(answered: int) -> bool:
    """Which requests the learning curve marks: every 5th of the first 50, every 10th to 300,
    every 50th to 2,000, then every 500th (a few hundred points over any run)."""
    step = 5 if answered <= 50 else 10 if answered <= 300 else 50 if answered <= 2000 else 500
    return answered % step == 0


@dataclass(frozen=True, slots=True)
class CurvePoint:
    """The learning curve at one request: what the cascade had cost against the last tier alone,
    and what its controller estimated then (the quality is an estimate: the gateway has no labels)."""

    requests: int
    cost_ratio: float | None  # (charged + shadow) / the last tier alone, since start
    escalation_rate: float  # share answered by the last tier, since start
    mode: str
    threshold: float | None
    quality: float | None  # the controller's estimate of the share of the last tier's quality kept
    quality_lower_bound: float | None


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
    curve: list[CurvePoint] = field(default_factory=list)

    @property
    def saved(self) -> Decimal:
        """Against sending every request to the last tier: every cheap attempt, judge and shadow
        call paid for."""
        return self.always_last - self.charged - self.shadow

    @property
    def escalation_rate(self) -> float | None:
        return self.escalated / self.answered if self.answered else None

    def count(self, ctx: RequestContext, escalated: bool, always_last: Decimal) -> None:
        if ctx.outcome.error is not None or ctx.outcome.status_code >= 400:
            return
        self.answered += 1
        self.escalated += escalated
        self.charged += ctx.meter.cost
        self.always_last += always_last

    def count_shadow(self, cost: Decimal) -> None:
        """A shadow sample's cost (gateway/routing/sampling.py), paid beside the requests'."""
        self.shadow += cost

    def mark(self, mode: str, threshold: float | None, quality: float | None, lower: float | None) -> None:
        """A point of the learning curve, when the request just counted is one it marks."""
        if not self.answered or not on_curve(self.answered) or len(self.curve) >= MAX_CURVE_POINTS:
            return
        spent = self.charged + self.shadow
        ratio = float(spent / self.always_last) if self.always_last > 0 else None
        self.curve.append(
            CurvePoint(self.answered, ratio, self.escalated / self.answered, mode, threshold, quality, lower)
        )
