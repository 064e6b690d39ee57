"""The plain route target: a deployment, then each of its fallbacks in order, until one answers.
A deployment that serves the client's API itself (config `apis`) is sent the client's own body
(gateway/native_calls.py); any other gets the Chat Completions translation."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal

from starlette.responses import Response, StreamingResponse

from gateway.calls import call, open_relay
from gateway.context import RequestContext
from gateway.deployments import Deployment
from gateway.errors import UpstreamError
from gateway.metrics import Metrics
from gateway.native_calls import call_native, open_native_relay, serves_natively
from gateway.routing.target import breaker_team, circuit_open
from gateway.sse import SSE_HEADERS
from gateway.worst_case import worst_case
from policies.breaker import Breakers


class DirectTarget:
    """A deployment, then each of its fallbacks in order, until one answers."""

    def __init__(
        self, dep: Deployment, deployments: Mapping[str, Deployment], metrics: Metrics, breakers: Breakers
    ) -> None:
        self.chain = [dep] + [deployments[name] for name in dep.config.fallbacks]
        self.metrics = metrics
        self.breakers = breakers  # policies/breaker.py: a deployment whose breaker is open is skipped

    def worst_case_cost(self, ctx: RequestContext) -> Decimal:
        # Failed calls are not charged, so only the one deployment that answers costs money.
        return max(worst_case(ctx, dep) for dep in self.chain)

    async def answer(self, ctx: RequestContext) -> Response:
        error: UpstreamError | None = None
        team = breaker_team(ctx)
        for dep in self.chain:
            if not self.breakers.allow(dep.name, team):
                error = error or circuit_open(self.breakers, dep.name, team)
                continue
            try:
                response = await self._call(ctx, dep)
            except UpstreamError as err:
                self.metrics.upstream_errors.labels(dep.name, err.code or "").inc()
                if err.deployment_fault:
                    self.breakers.record(dep.name, False, team)
                error = err
                continue
            self.breakers.record(dep.name, True, team)
            return response
        assert error is not None
        raise error

    @staticmethod
    async def _call(ctx: RequestContext, dep: Deployment) -> Response:
        """One deployment's answer: in the client's own API when it serves it (native_calls.py)."""
        native = serves_natively(ctx, dep)
        if ctx.stream:
            relay = await (open_native_relay(ctx, dep) if native else open_relay(ctx, dep))
            return StreamingResponse(relay, media_type="text/event-stream", headers=SSE_HEADERS)
        if native:
            completion = await call_native(ctx, dep)
        else:
            completion = await call(ctx, dep)
            ctx.response_body = completion.body
        return Response(completion.raw, media_type="application/json")
