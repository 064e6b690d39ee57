"""Stage: once the answer is complete, one ledger row, the metrics and the access-log line for it.

Only requests with a valid key get a row (refused or not): a request without one is counted
in `costgate_unauthenticated_requests`, so nobody can fill the ledger's disk without a key."""

from __future__ import annotations

from starlette.responses import Response

from gateway.core.context import RequestContext
from gateway.edge.access_log import log_request
from gateway.metrics import Metrics
from gateway.storage.ledger import LedgerRow, LedgerWriter
from gateway.upstream.tracing import Tracing


class Record:
    def __init__(self, ledger: LedgerWriter, metrics: Metrics, tracing: Tracing | None = None) -> None:
        self.ledger = ledger
        self.metrics = metrics
        self.tracing = tracing

    async def __call__(self, ctx: RequestContext) -> Response | None:
        if self.tracing is not None:
            ctx.trace = self.tracing.start(ctx)  # its upstream calls' spans are its children
        return None

    async def settle(self, ctx: RequestContext) -> None:
        if ctx.trace is not None:
            ctx.trace.finish(ctx)
        log_request(ctx)
        if ctx.principal is None:
            self.metrics.unauthenticated.labels("v1").inc()
            return
        self.ledger.record(LedgerRow.from_context(ctx))
        self.metrics.observe(ctx)
