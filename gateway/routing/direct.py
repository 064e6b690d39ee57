"""The plain route target: a deployment, then each of its fallbacks in order, until one answers.
A deployment that serves the client's API itself (config `apis`) is sent the client's own body
(gateway/upstream/native_calls.py); any other gets the Chat Completions translation."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal

from starlette.responses import Response, StreamingResponse

from gateway.core.context import RequestContext
from gateway.core.errors import CircuitOpen, UnreadableAnswer, UpstreamError
from gateway.core.sse import SSE_HEADERS
from gateway.metrics import Metrics
from gateway.routing.guarded_call import Upstream
from gateway.upstream.deployments import Deployment
from gateway.upstream.native_calls import serves_natively
from gateway.upstream.worst_case import worst_case
from policies.breaker import Breakers


class DirectTarget:
    """A deployment, then each of its fallbacks in order, until one answers."""

    def __init__(
        self, dep: Deployment, deployments: Mapping[str, Deployment], metrics: Metrics, breakers: Breakers
    ) -> None:
        self.chain = [dep] + [deployments[name] for name in dep.config.fallbacks]
        self.upstream = Upstream(breakers, metrics)  # a deployment whose breaker is open is skipped

    def worst_case_cost(self, ctx: RequestContext) -> Decimal:
        # Failed calls are not charged, so only the one deployment that answers costs money.
        # The one failure that is charged (a 2xx answer the gateway cannot read, billed at its
        # worst case) ends the chain: the hold covers that call, not a fallback's as well.
        return max(worst_case(ctx, dep) for dep in self.chain)

    async def answer(self, ctx: RequestContext) -> Response:
        error: UpstreamError | None = None
        for dep in self.chain:
            try:
                return await self._call(ctx, dep)
            except CircuitOpen as skipped:  # a real failure before it says more
                error = error or skipped
            except UnreadableAnswer:
                raise
            except UpstreamError as err:
                error = err
        assert error is not None
        raise error

    async def _call(self, ctx: RequestContext, dep: Deployment) -> Response:
        """One deployment's answer, through the guarded call (routing/upstream.py): in the
        client's own API when the deployment serves it (native_calls.py)."""
        native = serves_natively(ctx, dep)
        if ctx.asked.stream:
            relay = await self.upstream.relay(ctx, dep, native)
            return StreamingResponse(relay, media_type="text/event-stream", headers=SSE_HEADERS)
        completion = await self.upstream.answer(ctx, dep, native)
        if not native:  # a native call keeps the chat answer it stands for itself
            ctx.outcome.answered(completion.body)
        return Response(completion.raw, media_type="application/json")
