"""Alert delivery (gateway/spend/alerting.py): each alert POSTed as JSON to the webhook, retried until
accepted or the retries run out, counted either way; off the request path through a queue that
shutdown drains. The webhook is httpx.MockTransport; backoff 0 so retries do not wait."""

from __future__ import annotations

import httpx
import orjson
import pytest
from prometheus_client import CollectorRegistry

from gateway.spend.alerting import WebhookNotifier
from gateway.spend.budget_metrics import BudgetMetrics
from policies.alerts import Alert, AlertKind

URL = "http://hooks.test/costgate"
ALERT = Alert(AlertKind.BUDGET_THRESHOLD, "team:team_1", "monthly", "2026-11", 0.8, "100", "80.5", 1.0e9, "bud_1")


class Hook:
    """A webhook that fails its first `fail_first` calls (with a status, or by refusing the connection)."""

    def __init__(self, fail_first: int = 0, failure: int | None = 500) -> None:
        self.fail_first, self.failure = fail_first, failure
        self.received: list[dict] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.received.append(orjson.loads(request.content))
        if len(self.received) > self.fail_first:
            return httpx.Response(204)
        if self.failure is None:
            raise httpx.ConnectError("refused", request=request)
        return httpx.Response(self.failure)


def notifier(hook: Hook, retries: int = 3) -> tuple[WebhookNotifier, CollectorRegistry]:
    registry = CollectorRegistry()
    n = WebhookNotifier(URL, BudgetMetrics(registry), retries=retries, backoff_s=0, transport=httpx.MockTransport(hook))
    return n, registry


def count(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, labels) or 0.0


async def test_an_accepted_alert_is_sent_once_as_its_payload() -> None:
    hook = Hook()
    n, registry = notifier(hook)
    assert await n.deliver(ALERT) is True
    assert hook.received == [ALERT.payload()]
    assert hook.received[0]["type"] == "budget_threshold" and hook.received[0]["threshold"] == 0.8
    assert count(registry, "costgate_alert_webhooks_sent_total", kind="budget_threshold") == 1
    assert count(registry, "costgate_alert_webhook_failures_total", outcome="retry") == 0
    await n.close()


@pytest.mark.parametrize("failure", [500, 429, None])  # an error status, or no connection at all
async def test_failures_are_retried_until_accepted(failure: int | None) -> None:
    hook = Hook(fail_first=2, failure=failure)
    n, registry = notifier(hook, retries=3)
    assert await n.deliver(ALERT) is True
    assert len(hook.received) == 3 and all(p == ALERT.payload() for p in hook.received)
    assert count(registry, "costgate_alert_webhook_failures_total", outcome="retry") == 2
    assert count(registry, "costgate_alert_webhooks_sent_total", kind="budget_threshold") == 1
    await n.close()


async def test_it_gives_up_after_its_retries_and_says_so() -> None:
    hook = Hook(fail_first=100)
    n, registry = notifier(hook, retries=2)
    assert await n.deliver(ALERT) is False
    assert len(hook.received) == 3  # the first try and two retries
    assert count(registry, "costgate_alert_webhook_failures_total", outcome="retry") == 2
    assert count(registry, "costgate_alert_webhook_failures_total", outcome="gave_up") == 1
    assert count(registry, "costgate_alert_webhooks_sent_total", kind="budget_threshold") == 0
    await n.close()


async def test_queued_alerts_go_out_in_order_and_close_drains_them() -> None:
    hook = Hook()
    n, _ = notifier(hook)
    n.start()
    rate = Alert(AlertKind.SPEND_RATE, "all", "hourly", "480000", None, "20", "21", 1.0e9)
    n.send(ALERT)
    n.send(rate)
    await n.close()  # drains the queue before it stops
    assert [p["type"] for p in hook.received] == ["budget_threshold", "spend_rate"]
