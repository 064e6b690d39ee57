"""Prometheus metrics, in a registry owned by the app (never the global one).

Every label value comes from a bounded set: configured model names (anything else a client
asks for is `unknown`), team names the admin created, status codes, and enums. A label fed
by client input would let anyone grow /metrics without bound (5,000 requests for made-up
model names once took it from 30 KB to 28.6 MB).
"""

from __future__ import annotations

from collections.abc import Container
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.metrics import MetricWrapperBase

from gateway.core.context import CacheStatus, RequestContext
from gateway.core.meter import Meter

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
UNKNOWN_MODEL = "unknown"


def saving_reason(ctx: RequestContext) -> str:
    """Why a request cost less than list price: a cache hit (`exact`/`semantic`) or the batch lane."""
    if ctx.outcome.cache_status is not CacheStatus.MISS:
        return ctx.outcome.cache_status.value
    return "batch" if ctx.decided.price_factor < 1 and ctx.outcome.provider == "local" else "other"


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(
            "costgate_requests", "Requests answered", ["team", "model", "status", "cache"], registry=r
        )
        self.tokens = Counter("costgate_tokens", "Tokens used upstream", ["team", "model", "kind"], registry=r)
        self.cost = Counter("costgate_cost_usd", "Dollars charged", ["team", "model"], registry=r)
        self.saved = Counter(
            "costgate_saved_usd",
            "Dollars avoided (cache hits, cheaper tiers, the providers' prompt caches and batch/flex tiers)",
            ["team", "model", "reason"],
            registry=r,
        )
        # A request whose prompt the provider wrote to its cache cost more than list price (1.25x
        # or 2x input for those tokens): counters only rise, so that premium is its own counter;
        # the provider cache's net saving is saved{reason="provider_cache"} minus it.
        self.cache_write_premium = Counter(
            "costgate_provider_cache_write_premium_usd",
            "Dollars provider prompt-cache writes cost beyond plain input",
            ["team", "model"],
            registry=r,
        )
        self.tier_premium = Counter(  # a priority tier, Anthropic's regions and fast mode: beyond list price
            "costgate_provider_tier_premium_usd",
            "Dollars a provider's priority tier cost beyond its list price",
            ["team", "model"],
            registry=r,
        )
        self.latency = Histogram(
            "costgate_request_latency_seconds", "Whole-request latency", ["model"], buckets=LATENCY_BUCKETS, registry=r
        )
        self.ttft = Histogram(
            "costgate_ttft_seconds", "Time to first streamed token", ["model"], buckets=LATENCY_BUCKETS, registry=r
        )
        self.upstream_errors = Counter(
            "costgate_upstream_errors", "Failed upstream calls", ["model", "code"], registry=r
        )
        self.unauthenticated = Counter(
            "costgate_unauthenticated_requests",
            "Requests refused for a missing or invalid key (they get no ledger row)",
            ["area"],
            registry=r,
        )
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        self._models: Container[str] = ()

    def label_models(self, names: Container[str]) -> None:
        """The model names that may appear as labels (the gateway's targets, a live view)."""
        self._models = names

    def model_label(self, name: str | None) -> str:
        return name if name and name in self._models else UNKNOWN_MODEL

    def _child(self, metric: MetricWrapperBase, *labels: str) -> Any:
        """`metric.labels(*labels)`, remembered: prometheus-client validates and locks on every
        lookup, and `observe` makes five of them per request."""
        key = (id(metric), labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    def observe(self, ctx: RequestContext) -> None:
        meter, outcome, child = ctx.meter, ctx.outcome, self._child
        team = ctx.principal.team_name if ctx.principal else ""
        model = self.model_label(outcome.served_model or ctx.asked.model)
        child(self.requests, team, model, str(outcome.status_code), outcome.cache_status.value).inc()
        if meter.usage.prompt_tokens:
            child(self.tokens, team, model, "prompt").inc(meter.usage.prompt_tokens)
        if meter.usage.completion_tokens:
            child(self.tokens, team, model, "completion").inc(meter.usage.completion_tokens)
        if meter.cost:
            child(self.cost, team, model).inc(float(meter.cost))
        if meter.saved:
            child(self.saved, team, model, saving_reason(ctx)).inc(float(meter.saved))
        self._provider_savings(meter, team, model)
        child(self.latency, model).observe(ctx.latency_s)
        ttft = ctx.ttft_s
        if ttft is not None:
            child(self.ttft, model).observe(ttft)

    def _provider_savings(self, meter: Meter, team: str, model: str) -> None:
        usage, child = meter.usage, self._child
        for kind, tokens in (
            ("cache_read", usage.cached_tokens),
            ("cache_write", usage.cache_write_tokens + usage.cache_write_1h_tokens),
        ):
            if tokens:
                child(self.tokens, team, model, kind).inc(tokens)
        if meter.provider_cache_saved > 0:
            child(self.saved, team, model, "provider_cache").inc(float(meter.provider_cache_saved))
        elif meter.provider_cache_saved < 0:
            child(self.cache_write_premium, team, model).inc(float(-meter.provider_cache_saved))
        if meter.provider_tier_saved > 0:
            child(self.saved, team, model, "provider_" + meter.tier.value).inc(float(meter.provider_tier_saved))
        elif meter.provider_tier_saved < 0:
            child(self.tier_premium, team, model).inc(float(-meter.provider_tier_saved))

    def render(self) -> bytes:
        return generate_latest(self.registry)
