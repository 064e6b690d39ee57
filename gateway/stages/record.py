"""Stage: once the answer is complete, one ledger row and the metrics for it."""

from __future__ import annotations

from starlette.responses import Response

from gateway.context import RequestContext
from gateway.metrics import Metrics
from gateway.storage.ledger import LedgerRow, LedgerWriter


class Record:
    def __init__(self, ledger: LedgerWriter, metrics: Metrics) -> None:
        self.ledger = ledger
        self.metrics = metrics

    async def __call__(self, ctx: RequestContext) -> Response | None:
        return None

    async def settle(self, ctx: RequestContext) -> None:
        self.ledger.record(LedgerRow.from_context(ctx))
        self.metrics.observe(ctx)
