"""The routing policies of one gateway — cascades and the cost router — built from the settings
and registered beside the deployments under their model names."""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncEngine

from gateway.deployments import Deployment
from gateway.metrics import Metrics
from gateway.minilm import MiniLM
from gateway.routing.cascade import CascadeTarget, build_cascade
from gateway.routing.confidence import Confidence, PureConfidence
from gateway.routing.judge import JudgeScorer
from gateway.routing.learning import Learning, learning_for
from gateway.routing.metrics import PolicyMetrics
from gateway.routing.router import CostRouterTarget
from gateway.routing.services import Services, SideLane
from gateway.routing.target import RouteTarget
from gateway.routing.upstream import Upstream
from gateway.settings import Settings
from gateway.storage.cascade_samples import SampleStore
from gateway.storage.feedback import FeedbackStore
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
    """Builds the cascades and the cost router, adds them to `targets`, and runs their upkeep."""

    def __init__(
        self,
        settings: Settings,
        deployments: Mapping[str, Deployment],
        targets: MutableMapping[str, RouteTarget],
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
        self.cascades: dict[str, CascadeTarget] = {}
        for config in settings.cascades:
            if config.name in targets or config.name in self.cascades:
                raise ValueError(f"cascade {config.name!r}: the name is already a model")
            self.cascades[config.name] = build_cascade(
                config, deployments, build_scorer(config.scorer, deployments, upstream), services
            )
        self.learning: dict[str, Learning] = {}
        feedback = FeedbackStore(db)
        for name, cascade in self.cascades.items():
            cascade.learner = self.learning[name] = learning_for(cascade, feedback, Path(settings.data_dir))
        targets.update(self.cascades)
        self.router: CostRouterTarget | None = None
        if settings.cost_router is not None:
            if settings.cost_router.name in targets:
                raise ValueError(f"cost_router: the name {settings.cost_router.name!r} is already a model")
            self.router = CostRouterTarget(settings.cost_router, deployments, targets, breakers, self.metrics)
            targets[settings.cost_router.name] = self.router
        self.metrics.watch(breakers, lambda: {n: c.controller.estimate() for n, c in self.cascades.items()})

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
