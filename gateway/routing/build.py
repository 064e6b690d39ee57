"""The routing policies of one gateway — cascades and the cost router — built from the settings;
`RoutingPolicies.targets` names them, for `build_gateway` to put beside the deployments' targets
in the one targets mapping it builds (nothing adds to that mapping afterwards)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncEngine

from gateway.caching.minilm import MiniLM
from gateway.config.settings import Settings
from gateway.core.context import RequestContext
from gateway.metrics import Metrics
from gateway.routing.cascade import CascadeTarget, build_cascade, initial_state
from gateway.routing.cascade_metrics import PolicyMetrics
from gateway.routing.cascade_services import Services, SideLane, StateSlot
from gateway.routing.confidence import Confidence, PureConfidence
from gateway.routing.cost_router import CostRouterTarget
from gateway.routing.guarded_call import Upstream
from gateway.routing.judge import JudgeScorer
from gateway.routing.learning import Learning, learning_for
from gateway.routing.target import RouteTarget
from gateway.storage.cascade_samples import SampleStore
from gateway.storage.verdict_store import FeedbackStore
from gateway.upstream.deployments import Deployment
from policies.breaker import Breakers
from policies.scorers.learned import LearnedScorer
from policies.scorers.logprob import LogprobScorer
from policies.scorers.rules import RuleScorer


def build_scorer(spec: str, deployments: Mapping[str, Deployment], upstream: Upstream) -> Confidence:
    """`rules` | `logprob` | `learned` (the bundled model) | `learned:PATH` | `judge:MODEL`."""
    kind, _, arg = spec.partition(":")
    if kind == "rules":
        return PureConfidence(RuleScorer())
    if kind == "logprob":
        return PureConfidence(LogprobScorer())
    if kind == "learned":
        if arg and not Path(arg).is_file():
            raise ValueError(f"scorer {spec!r}: no such file {arg!r} (make one with `costgate cascade train`)")
        return PureConfidence(LearnedScorer.from_file(arg or None))
    if kind == "judge":
        if arg not in deployments:
            raise ValueError(f"scorer {spec!r}: unknown judge model {arg!r}")
        return JudgeScorer(deployments[arg], upstream)
    raise ValueError(f"unknown scorer {spec!r}: use rules, logprob, learned[:PATH] or judge:MODEL")


class RoutingPolicies:
    """Builds the cascades (each with its learning) and the cost router, and runs their upkeep.

    `direct`: the deployments' own targets, read only (the names taken, and what the cost router
    sends to)."""

    def __init__(
        self,
        settings: Settings,
        deployments: Mapping[str, Deployment],
        direct: Mapping[str, RouteTarget],
        breakers: Breakers,
        db: AsyncEngine,
        side_lane: SideLane,
        metrics: Metrics,
        minilm: MiniLM | None = None,
    ) -> None:
        self.metrics = PolicyMetrics(metrics.registry)
        self.store = SampleStore(db)
        self.breakers = breakers
        self.minilm = minilm  # the queries' topics (policies/scorers/topic.py); None: every query at the mean
        embed = minilm.embed_many if minilm is not None else None
        upstream = Upstream(breakers, metrics)
        services = Services(upstream, side_lane, metrics, self.metrics, self.store, settings.log_prompts, embed)
        feedback, data_dir = FeedbackStore(db), Path(settings.data_dir)
        self.cascades: dict[str, CascadeTarget] = {}
        self.learning: dict[str, Learning] = {}
        for config in settings.cascades:
            if config.name in direct or config.name in self.cascades:
                raise ValueError(f"cascade {config.name!r}: the name is already a model")
            # the cascade reads its state from the slot; its learning is the slot's one writer
            slot = StateSlot(initial_state(config, build_scorer(config.scorer, deployments, upstream)))
            learning = self.learning[config.name] = learning_for(config, services, slot, feedback, data_dir)
            self.cascades[config.name] = build_cascade(config, deployments, slot, services, learning)
        self.router: CostRouterTarget | None = None
        if settings.cost_router is not None:
            if settings.cost_router.name in direct or settings.cost_router.name in self.cascades:
                raise ValueError(f"cost_router: the name {settings.cost_router.name!r} is already a model")
            self.router = CostRouterTarget(settings.cost_router, deployments, direct, breakers, self.metrics)
        self.metrics.watch(breakers, lambda: {n: c.state.controller.estimate() for n, c in self.cascades.items()})

    @property
    def targets(self) -> dict[str, RouteTarget]:
        """The model names these policies answer, beside the deployments'."""
        named: dict[str, RouteTarget] = dict(self.cascades)
        if self.router is not None:
            named[self.router.config.name] = self.router
        return named

    def settled(self, ctx: RequestContext) -> None:
        """A request settled (gateway/pipeline.py): the cascade that answered it counts it and
        starts its shadow sample, if one was drawn."""
        for cascade in self.cascades.values():
            cascade.settled(ctx)

    async def start(self) -> None:
        if self.cascades:
            if self.minilm is not None:
                self.minilm.load()  # now, not on the first request
            for cascade in self.cascades.values():
                await cascade.load()

    async def stop(self) -> None:
        for cascade in self.cascades.values():
            await cascade.drain()
        for learning in self.learning.values():
            await learning.drain()
