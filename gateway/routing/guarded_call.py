"""`Upstream`: the one guarded way to call a deployment, whoever calls (issue 25, STYLE.md 14).

Every upstream call a request makes goes through it: a route's own answer (whole or streamed,
in Chat Completions or the client's own API), a cascade tier, a judge's grade, a compression
summary, a shadow sample's tiers. Each call, in order:

1. the deployment's circuit breaker allows it, for the request's team (policies/breaker.py), or
   it is refused with `CircuitOpen` before anything is sent;
2. it is sent with the request's priority class (engine/admission.py), which a local engine's
   admission and vLLM's scheduler read (gateway/providers/local.py), and retried by the provider
   as its config says (gateway/providers/retry.py);
3. it is metered and charged to the request (gateway/upstream/calls.py, gateway/upstream/native_calls.py);
4. its outcome is recorded on the breaker: a success, or a failure that is the deployment's
   fault, which is also counted in `costgate_upstream_errors`. A call that says nothing of the
   deployment (the upstream refused the client's bad request, the request was cancelled) records
   nothing and releases the half-open probe it may have claimed, so the next call probes.

A stream's outcome is recorded once it has opened: what fails after the first byte is the
client's answer to end, not a reason to fall back.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from gateway.core.context import Endpoint, RequestContext
from gateway.core.errors import UpstreamError
from gateway.metrics import Metrics
from gateway.providers.base import Completion
from gateway.routing.target import breaker_team, circuit_open
from gateway.upstream.calls import call, complete, open_relay
from gateway.upstream.deployments import Deployment
from gateway.upstream.native_calls import call_native, open_native_relay
from policies.breaker import Breakers

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Upstream:
    breakers: Breakers
    metrics: Metrics

    async def answer(self, ctx: RequestContext, dep: Deployment, native: bool = False) -> Completion:
        """The client's whole answer from `dep`; `native`: in the client's own API, which `dep`
        serves (gateway/upstream/native_calls.py), else in Chat Completions (gateway/upstream/calls.py)."""
        return await self._guarded(ctx, dep, lambda: call_native(ctx, dep) if native else call(ctx, dep))

    async def relay(self, ctx: RequestContext, dep: Deployment, native: bool = False) -> AsyncIterator[bytes]:
        """The client's answer from `dep` as a stream, opened now (so a failure can fall back)."""
        return await self._guarded(ctx, dep, lambda: open_native_relay(ctx, dep) if native else open_relay(ctx, dep))

    async def complete(
        self, ctx: RequestContext, dep: Deployment, body: dict[str, Any], endpoint: Endpoint | None = None
    ) -> Completion:
        """A call a policy makes on the request's behalf with a body of its own (a tier asked for
        logprobs, a judge's grading prompt, a summary): charged to the request like any call."""
        return await self._guarded(ctx, dep, lambda: complete(ctx, dep, body, endpoint))

    async def _guarded(self, ctx: RequestContext, dep: Deployment, attempt: Callable[[], Awaitable[T]]) -> T:
        team = breaker_team(ctx)
        if not self.breakers.allow(dep.name, team):
            raise circuit_open(self.breakers, dep.name, team)
        try:
            result = await attempt()
        except UpstreamError as err:
            self.metrics.upstream_errors.labels(dep.name, err.code or "").inc()
            if err.deployment_fault:
                self.breakers.record(dep.name, False, team)
            else:
                self.breakers.release(dep.name, team)
            raise
        except BaseException:
            self.breakers.release(dep.name, team)
            raise
        self.breakers.record(dep.name, True, team)
        return result
