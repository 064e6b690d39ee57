"""Metrics for budgets, rate limits and alerts, registered in the app's registry."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge


class BudgetMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        self.refused = Counter(
            "costgate_budget_refusals",
            "Requests refused by a budget, rate limit or plan",
            ["reason", "scope"],
            registry=r,
        )
        self.store_errors = Counter(
            "costgate_budget_store_errors", "Counter store (Redis) failures", ["op", "mode"], registry=r
        )
        self.alerts = Counter(
            "costgate_budget_alerts",
            "Budget and spend-rate alerts raised",
            ["kind", "subject", "threshold"],
            registry=r,
        )
        self.alert_state = Gauge(
            "costgate_budget_alert_threshold_reached",
            "Highest alert threshold reached this period (fraction of the budget)",
            ["budget_id", "subject"],
            registry=r,
        )
        self.used_ratio = Gauge(
            "costgate_budget_used_ratio",
            "Spend committed this period as a fraction of the budget (updated as requests settle)",
            ["budget_id", "subject"],
            registry=r,
        )
        self.webhooks = Counter("costgate_alert_webhooks_sent", "Alert webhooks delivered", ["kind"], registry=r)
        self.webhook_failures = Counter(
            "costgate_alert_webhook_failures", "Failed alert webhook attempts", ["outcome"], registry=r
        )
        self.reclaimed = Counter(
            "costgate_budget_holds_reclaimed",
            "Reservations reclaimed: past their deadline, or of a replica whose lease ended",
            registry=r,
        )
