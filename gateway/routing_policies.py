"""The routing policies of one gateway — cascades and the cost router — built from the
settings and registered in `gateway.targets` under their model names."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from gateway.deployments import Deployment
from policies.cascade import CascadeTarget, Services, build_cascade
from policies.cascade_metrics import PolicyMetrics
from policies.cascade_store import SampleStore
from policies.router import CostRouterTarget
from policies.scorers import Scorer
from policies.scorers.judge import JudgeScorer
from policies.scorers.learned import LearnedScorer
from policies.scorers.logprob import LogprobScorer
from policies.scorers.rules import RuleScorer

if TYPE_CHECKING:
    from gateway.app import Gateway


def build_scorer(spec: str, deployments: Mapping[str, Deployment]) -> Scorer:
    """`rules` | `logprob` | `learned` (the bundled model) | `learned:PATH` | `judge:MODEL`."""
    kind, _, arg = spec.partition(":")
    if kind == "rules":
        return RuleScorer()
    if kind == "logprob":
        return LogprobScorer()
    if kind == "learned":
        if arg and not Path(arg).is_file():
            raise ValueError(f"scorer {spec!r}: no such file {arg!r} (make one with `costgate cascade train`)")
        return LearnedScorer.from_file(arg or None)
    if kind == "judge":
        if arg not in deployments:
            raise ValueError(f"scorer {spec!r}: unknown judge model {arg!r}")
        return JudgeScorer(deployments[arg])
    raise ValueError(f"unknown scorer {spec!r}: use rules, logprob, learned[:PATH] or judge:MODEL")


class RoutingPolicies:
    def __init__(self, gateway: Gateway) -> None:
        settings = gateway.settings
        self.metrics = PolicyMetrics(gateway.metrics.registry)
        self.store = SampleStore(gateway.engine)
        self.breakers = gateway.breakers
        services = Services(gateway.breakers, gateway.ledger, gateway.metrics, self.metrics, self.store,
                            settings.log_prompts)
        self.cascades: dict[str, CascadeTarget] = {}
        for config in settings.cascades:
            if config.name in gateway.targets or config.name in self.cascades:
                raise ValueError(f"cascade {config.name!r}: the name is already a model")
            self.cascades[config.name] = build_cascade(config, gateway.deployments,
                                                       build_scorer(config.scorer, gateway.deployments), services)
        gateway.targets.update(self.cascades)
        self.router: CostRouterTarget | None = None
        if settings.cost_router is not None:
            if settings.cost_router.name in gateway.targets:
                raise ValueError(f"cost_router: the name {settings.cost_router.name!r} is already a model")
            self.router = CostRouterTarget(settings.cost_router, gateway.deployments, gateway.targets,
                                           gateway.breakers, self.metrics)
            gateway.targets[settings.cost_router.name] = self.router
        self.metrics.watch(gateway.breakers, lambda: {n: c.controller.estimate() for n, c in self.cascades.items()})

    async def start(self) -> None:
        if self.cascades:
            await self.store.create()
            for cascade in self.cascades.values():
                await cascade.load()

    async def stop(self) -> None:
        for cascade in self.cascades.values():
            await cascade.drain()
