"""Budget alerts: once per budget, period and threshold (and once per hour for the spend-rate
alerts), whichever replica settles the request that crosses it. The counter store deduplicates
across replicas (`claim_alert`); a memo saves this process the round trip for the ones it has
seen. A claimed alert is counted in metrics, logged, and sent to the webhook when one is
configured (gateway/spend/alerting.py). Thresholds and rates are pure policy (policies/alerts.py).
"""

from __future__ import annotations

import logging
from decimal import Decimal

import httpx

from gateway.config.limits_config import AlertSettings
from gateway.spend.alerting import WebhookNotifier
from gateway.spend.budget_metrics import BudgetMetrics
from gateway.storage.counters import BudgetStore
from policies.alerts import Alert, AlertKind, hour_key, over_rate, reached
from policies.budgets import Clock, Hold, window
from policies.pricing import format_usd, from_pico, to_pico

log = logging.getLogger("costgate.budgets")

COUNTER_GRACE_S = 2 * 86_400  # a period's counter outlives the period, for late settles and reports
HOUR_TTL_S = 7_200


class BudgetAlerts:
    def __init__(
        self,
        store: BudgetStore,
        config: AlertSettings,
        metrics: BudgetMetrics,
        clock: Clock,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.store, self.config, self.metrics, self.clock = store, config, metrics, clock
        self.notifier = (
            None
            if not config.webhook_url
            else WebhookNotifier(
                config.webhook_url, metrics, config.retries, config.backoff_s, config.timeout_s, transport
            )
        )
        self._claimed: set[tuple[str, str]] = set()  # alerts this process knows are claimed

    def start(self) -> None:
        if self.notifier is not None:
            self.notifier.start()

    async def close(self) -> None:
        if self.notifier is not None:
            await self.notifier.close()

    async def raise_for(self, hold: Hold, spent: list[int], team_id: str) -> None:
        """After a settle: alert every threshold of the hold's budgets that `spent` (each
        budget's spend, then the team's and everyone's hourly spend) has reached."""
        now = hold.now
        for b, total in zip(hold.budgets, spent):
            if b.amount_pusd:
                self.metrics.used_ratio.labels(b.id or "plan-cap", f"{b.scope.value}:{b.subject}").set(
                    total / b.amount_pusd
                )
            for t in reached(total, b.amount_pusd, b.alert_at):
                w = window(b.period, now)
                alert = Alert(
                    AlertKind.BUDGET_THRESHOLD,
                    f"{b.scope.value}:{b.subject}",
                    b.period.value,
                    w.key,
                    t,
                    format_usd(from_pico(b.amount_pusd)),
                    format_usd(from_pico(total)),
                    self.clock(),
                    b.id,
                )
                ttl = None if w.end is None else int(w.end - now) + COUNTER_GRACE_S
                if await self._claim(b.counter(now), str(t), ttl, alert):
                    self.metrics.alert_state.labels(b.id or "plan-cap", alert.subject).set(t)
        team_rate, all_rate = spent[len(hold.budgets) :]
        limits = (
            (f"team:{team_id}", team_rate, self.config.spend_rate_per_hour_usd),
            ("all", all_rate, self.config.total_spend_rate_per_hour_usd),
        )
        for subject, total, limit in limits:
            limit_pusd = None if limit is None else to_pico(Decimal(limit))
            if over_rate(total, limit_pusd):
                alert = Alert(
                    AlertKind.SPEND_RATE,
                    subject,
                    "hourly",
                    hour_key(now),
                    None,
                    format_usd(Decimal(limit or 0)),
                    format_usd(from_pico(total)),
                    self.clock(),
                )
                await self._claim(f"rate:{subject}:{hour_key(now)}", "rate", HOUR_TTL_S, alert)

    async def _claim(self, counter: str, label: str, ttl: int | None, alert: Alert) -> bool:
        """Send `alert` if no replica has claimed it yet (once per counter, i.e. per period)."""
        memo = (counter, label)
        if memo in self._claimed:
            return False
        if len(self._claimed) > 100_000:
            self._claimed.clear()  # the store still deduplicates; the memo only saves round trips
        new = await self.store.claim_alert(counter, label, alert.at, ttl)
        self._claimed.add(memo)
        if new:
            self.metrics.alerts.labels(alert.kind.value, alert.subject, str(alert.threshold or "")).inc()
            log.warning(
                "alert %s %s %s: spent $%s of $%s",
                alert.kind.value,
                alert.subject,
                alert.threshold if alert.threshold is not None else "hourly",
                alert.spent_usd,
                alert.amount_usd,
            )
            if self.notifier is not None:
                self.notifier.send(alert)
        return new
