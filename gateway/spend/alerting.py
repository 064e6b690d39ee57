"""Alert delivery: each alert is POSTed as JSON to the configured webhook, off the request
path, retried with exponential backoff (backoff_s, 2x, 4x, ...) until it is accepted (2xx) or
the retries run out. Deduplication (once per period per threshold) happens before, in the
store (`claim_alert`), so every replica sends each alert at most once between them."""

from __future__ import annotations

import asyncio
import logging

import httpx

from gateway.spend.budget_metrics import BudgetMetrics
from policies.alerts import Alert

log = logging.getLogger("costgate.alerts")


class WebhookNotifier:
    def __init__(
        self,
        url: str,
        metrics: BudgetMetrics,
        retries: int = 5,
        backoff_s: float = 0.5,
        timeout_s: float = 5.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.url = url
        self.metrics = metrics
        self.retries = retries
        self.backoff_s = backoff_s
        self._client = httpx.AsyncClient(timeout=timeout_s, transport=transport)
        self._queue: asyncio.Queue[Alert] = asyncio.Queue(maxsize=10_000)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="alert-webhook")

    def send(self, alert: Alert) -> None:
        try:
            self._queue.put_nowait(alert)
        except asyncio.QueueFull:
            log.error("alert queue full, dropped %s for %s", alert.kind.value, alert.subject)
            self.metrics.webhook_failures.labels("dropped").inc()

    async def _run(self) -> None:
        while True:
            alert = await self._queue.get()
            await self.deliver(alert)
            self._queue.task_done()

    async def deliver(self, alert: Alert) -> bool:
        for attempt in range(self.retries + 1):
            try:
                response = await self._client.post(self.url, json=alert.payload())
                if response.is_success:
                    self.metrics.webhooks.labels(alert.kind.value).inc()
                    return True
                reason = f"HTTP {response.status_code}"
            except httpx.HTTPError as err:
                reason = type(err).__name__
            self.metrics.webhook_failures.labels("retry" if attempt < self.retries else "gave_up").inc()
            log.warning("alert webhook attempt %d failed (%s)", attempt + 1, reason)
            if attempt < self.retries:
                await asyncio.sleep(self.backoff_s * 2**attempt)
        log.error("alert webhook gave up after %d attempts: %s %s", self.retries + 1, alert.kind.value, alert.subject)
        return False

    async def drain(self, timeout_s: float = 5.0) -> None:
        """Wait (bounded) for queued alerts to go out; used at shutdown."""
        try:
            await asyncio.wait_for(self._queue.join(), timeout_s)
        except TimeoutError:
            log.warning("shutdown with %d alerts unsent", self._queue.qsize())

    async def close(self) -> None:
        await self.drain()
        if self._task is not None:
            self._task.cancel()
        await self._client.aclose()
