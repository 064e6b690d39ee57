"""Prometheus metrics of the routing policies (cascades, breakers, router, compression),
registered on the app's own registry. Gauges that describe live state (a cascade's agreement
estimate, a breaker's state) are read at scrape time by a collector, so they never go stale."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from policies.breaker import Breakers, State
from policies.quality_controller import Estimate


class PolicyMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        r = registry
        self.cascade_answers = Counter(
            "costgate_cascade_answers", "Cascade answers by the tier that answered", ["cascade", "tier"], registry=r
        )
        self.cascade_shadow_calls = Counter(
            "costgate_cascade_shadow_calls", "Shadow calls to a cascade's last tier", ["cascade", "status"], registry=r
        )
        self.cascade_refits = Counter(
            "costgate_cascade_refits",
            "Refits of a cascade's learned scorer, by outcome (replaced: the candidate won; kept: it did not)",
            ["cascade", "outcome"],
            registry=r,
        )
        self.router_choices = Counter(
            "costgate_router_choices", "Models the cost router picked", ["router", "model"], registry=r
        )
        self.compressions = Counter("costgate_compressions", "Conversations compressed", ["model"], registry=r)
        self.compression_tokens_saved = Counter(
            "costgate_compression_tokens_saved", "Prompt tokens removed by context compression", ["model"], registry=r
        )

    def watch(self, breakers: Breakers, estimates: Callable[[], Mapping[str, Estimate]]) -> None:
        self.registry.register(_LiveState(breakers, estimates))


class _LiveState(Collector):
    def __init__(self, breakers: Breakers, estimates: Callable[[], Mapping[str, Estimate]]) -> None:
        self.breakers = breakers
        self.estimates = estimates

    def collect(self) -> Iterator[GaugeMetricFamily]:
        state = GaugeMetricFamily(
            "costgate_breaker_state", "1 for each deployment's current breaker state", labels=["deployment", "state"]
        )
        teams_open = GaugeMetricFamily(
            "costgate_breaker_teams_open",
            "Teams cut off from a deployment by their own failures (the others still served)",
            labels=["deployment"],
        )
        for name, view in self.breakers.views().items():
            for s in State:
                state.add_metric([name, s.value], 1.0 if view.state is s else 0.0)
            teams_open.add_metric([name], float(view.teams_open))
        yield state
        yield teams_open
        families = {
            "threshold": GaugeMetricFamily(
                "costgate_cascade_threshold",
                "Confidence a cheaper tier needs (absent: escalate all)",
                labels=["cascade"],
            ),
            "samples": GaugeMetricFamily(
                "costgate_cascade_shadow_samples", "Shadow samples in the estimate", labels=["cascade"]
            ),
            "agreement": GaugeMetricFamily(
                "costgate_cascade_agreement", "Estimated agreement with the last tier", labels=["cascade"]
            ),
            "lower": GaugeMetricFamily(
                "costgate_cascade_agreement_lower_bound", "Lower confidence bound of the agreement", labels=["cascade"]
            ),
            "quality": GaugeMetricFamily(
                "costgate_cascade_quality", "Estimated share of the last tier's quality kept", labels=["cascade"]
            ),
            "quality_lower": GaugeMetricFamily(
                "costgate_cascade_quality_lower_bound",
                "One-sided lower bound of the share of the last tier's quality kept",
                labels=["cascade"],
            ),
        }
        for name, e in self.estimates().items():
            families["samples"].add_metric([name], e.samples)
            if e.threshold is not None:
                families["threshold"].add_metric([name], e.threshold)
            if e.quality is not None and e.quality_lower_bound is not None:
                families["quality"].add_metric([name], e.quality)
                families["quality_lower"].add_metric([name], e.quality_lower_bound)
            if e.agreement is not None and e.lower_bound is not None:
                families["agreement"].add_metric([name], e.agreement)
                families["lower"].add_metric([name], e.lower_bound)
        yield from families.values()

    def describe(self) -> Iterator[GaugeMetricFamily]:
        return iter(())
