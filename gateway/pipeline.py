"""The request pipeline: every endpoint's requests pass through these stages, in this order.

A stage is a small object with `async def __call__(ctx) -> Response | None`. Returning a
response short-circuits the rest (a cache hit, the route's answer). A stage that also has
`async def settle(ctx)` gets it called once the answer is complete — for a stream, after its
last byte or when the client goes away — in reverse order, for every stage that was entered,
whether the request succeeded or failed. That is where reservations are released, caches
written and the ledger row recorded, and why nothing leaks when a request fails.

The context holds data only. What the pipeline calls on a request's behalf is handed to it with
the request: a route's body reader and the client's answer shape (`Pipeline.handle`), a side
request's calls (`SideLane.handle`).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

import anyio
import orjson
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from gateway.caching.response_cache import ResponseCache
from gateway.config.settings import CompressionConfig
from gateway.core.context import Api, CacheStatus, RequestContext, SideCall
from gateway.core.errors import GatewayError, error_response
from gateway.core.request_fields import DROPPED_HEADER, dropped_header
from gateway.core.sse import StreamEnd
from gateway.metrics import Metrics
from gateway.routing.cascade_metrics import PolicyMetrics
from gateway.routing.guarded_call import Upstream
from gateway.routing.target import RouteTarget
from gateway.spend.spend_control import SpendControl
from gateway.stages import authenticate, budget, cache, check_body, compress, priority, ratelimit, record, route
from gateway.stages.keep_text import KeepText
from gateway.stages.side_call import HoldSideCall, RunSideCall
from gateway.storage.keys import KeyStore
from gateway.storage.ledger import LedgerWriter
from gateway.upstream.deployments import Deployment
from gateway.upstream.inflight import StreamJournal
from gateway.upstream.tracing import Tracing
from policies.pricing import format_usd

log = logging.getLogger("costgate.pipeline")


class Stage(Protocol):
    async def __call__(self, ctx: RequestContext) -> Response | None: ...


class Settles(Protocol):
    """A stage may also settle: run after the answer (in reverse order), whatever happened."""

    async def settle(self, ctx: RequestContext) -> None: ...


BodyReader = Callable[[], Awaitable[dict[str, Any]]]  # the client's body, read and parsed (a route's)


class AnswerShape(Protocol):
    """How a translated request's answers leave (gateway/compat): the pipeline answers in Chat
    Completions' shapes, and the shape turns each answer, stream and refusal back into the
    client's API. A stream's `[DONE]` reaches `stream` only once the request is settled, so
    the translated stream's last event leaves after settlement too."""

    api: Api

    async def whole(self, ctx: RequestContext, response: Response) -> Response: ...

    def stream(self, ctx: RequestContext, chat: AsyncIterator[Any]) -> AsyncIterator[bytes]: ...

    def refusal(self, err: GatewayError, request_id: str) -> Response: ...


@dataclass(frozen=True, slots=True)
class StageParts:
    """What the stages are built from: the gateway's stores, policies and targets."""

    keys: KeyStore
    targets: Mapping[str, RouteTarget]
    deployments: Mapping[str, Deployment]
    spend: SpendControl
    cache: ResponseCache
    ledger: LedgerWriter
    metrics: Metrics
    compression: CompressionConfig
    policy_metrics: PolicyMetrics
    upstream: Upstream  # the guarded call the compress stage's summary goes through
    keep_text: KeepText | None = None  # only when a team keeps its text for distillation
    tracing: Tracing | None = None  # only when OTEL_* asks for spans (gateway/upstream/tracing.py)


def build_stages(parts: StageParts) -> list[Stage]:
    """The whole pipeline, in order. Later policies slot in here, nowhere else."""
    p = parts
    keep = [p.keep_text] if p.keep_text is not None else []
    # Built either way, so a config naming an unknown summarizer is refused even while off.
    compressing = compress.Compress(p.compression, p.deployments, p.policy_metrics, p.upstream)
    return [
        # First in, so its settle runs last; the body is read once it was entered, so a bad body
        # is refused and recorded like any other refusal.
        record.Record(p.ledger, p.metrics, p.tracing),
        check_body.CheckBody(),
        authenticate.Authenticate(p.keys, p.targets),
        ratelimit.RateLimit(p.spend, p.deployments),  # names the limits; counted below
        budget.ReserveBudget(p.spend, p.targets),  # limits + worst-case hold, one store call
        priority.Prioritize(),  # realtime | interactive | batch: replica admission and vLLM's priority
        *cache.cache_stages(p.cache, p.deployments),  # exact, then semantic: a hit answers at $0
        *([compressing] if p.compression.enabled else []),  # keep last before route
        *keep,  # reads the answer once settled: a team's cascade escalations, for distillation
        route.Route(p.targets),
    ]


OnRefusal = Callable[[RequestContext, GatewayError], Awaitable[GatewayError]]


class Pipeline:
    def __init__(
        self,
        stages: Sequence[Stage],
        on_refusal: OnRefusal | None = None,
        streams: StreamJournal | None = None,
        settled: Callable[[RequestContext], None] | None = None,
    ) -> None:
        self.stages = list(stages)
        self.on_refusal = on_refusal  # may answer another error instead (a 429 once refusals pile up)
        self.streams = streams  # journals streams in flight, for a crash to charge (gateway/upstream/inflight.py)
        # told of each request once it settled (gateway/routing/build.py: a cascade's tally and
        # shadow sample, which start only after the request's hold is released and its row written)
        self.settled = settled

    async def handle(
        self, ctx: RequestContext, body: BodyReader | None = None, shape: AnswerShape | None = None
    ) -> Response:
        """The request's answer. `body` reads the client's body (a route's request; without it,
        `ctx.body` is already parsed: a batch line, a test); `shape` answers in the client's API
        when it is not the endpoint's own (gateway/compat)."""
        entered: list[Stage] = []
        try:
            response = await self._enter(ctx, body, entered)
            if shape is not None and not isinstance(response, StreamingResponse):
                response = await shape.whole(ctx, response)  # a failed translation is refused, and settled
        except GatewayError as err:
            return await self._refuse(err, entered, ctx, shape)
        except Exception as err:  # a bug in a stage: still settle, so no hold or ledger row is lost
            log.exception("unhandled error in the pipeline", exc_info=err)
            return await self._refuse(GatewayError("internal error in the gateway"), entered, ctx, shape)
        if isinstance(response, StreamingResponse):
            settled = self._settle_after(response.body_iterator, entered, ctx)
            stream: AsyncIterator[bytes | str | memoryview] = settled
            if shape is not None:  # outside the settling: its last event follows the held [DONE]
                stream = settling_when_done(shape.stream(ctx, settled), settled)
            return with_headers(SettledStream(response, stream, partial(self._settle, entered, ctx)), ctx)
        await self._settle(entered, ctx)
        return with_headers(stamped(response, ctx), ctx)

    async def _enter(self, ctx: RequestContext, body: BodyReader | None, entered: list[Stage]) -> Response:
        """Enter the stages in order until one answers. The body is read once the first stage
        (Record) was entered: one that cannot be read, parsed or translated is refused, and
        recorded, like any refusal."""
        for stage in self.stages:
            entered.append(stage)
            response = await stage(ctx)
            if response is not None:
                return response
            if body is not None:
                ctx.set_body(await body())
                body = None
        raise RuntimeError("the pipeline's last stage must answer")

    async def _refuse(
        self, err: GatewayError, entered: list[Stage], ctx: RequestContext, shape: AnswerShape | None
    ) -> Response:
        if self.on_refusal is not None:
            err = await self.on_refusal(ctx, err)
        ctx.outcome.failed(err.status, err.message)
        await self._settle(entered, ctx)
        response = error_response(err) if shape is None else shape.refusal(err, ctx.request_id)
        return with_headers(response, ctx)

    async def _settle_after(
        self, body: AsyncIterable[bytes | str | memoryview], entered: list[Stage], ctx: RequestContext
    ) -> AsyncGenerator[bytes | str | memoryview, None]:
        done = None
        watch = self.streams.watch(ctx) if self.streams is not None else None
        try:
            async for chunk in body:
                if isinstance(chunk, StreamEnd):
                    done = chunk  # held back: the stream ends only once its ledger row is journaled
                    continue
                yield chunk
                if watch is not None:  # once the chunk is sent: journaling never delays a chunk
                    watch.relayed()
        except (GeneratorExit, anyio.get_cancelled_exc_class()):
            # The client went away mid-stream (the server cancels or closes the stream): its row
            # and log line must not read like a short, whole answer.
            ctx.outcome.client_left()
            raise
        finally:
            # Shielded: when the client disconnects, the stream is cancelled, and settling
            # (releasing the reservation, writing the ledger row) must still run to the end.
            with anyio.CancelScope(shield=True):
                await self._settle(entered, ctx)
            if watch is not None:
                watch.finished()
        if done is not None:
            yield done

    async def _settle(self, entered: list[Stage], ctx: RequestContext) -> None:
        """Settle every stage entered, once (a stream may get here from its body and its end)."""
        if ctx.settled:
            return
        ctx.settled = True
        ctx.outcome.finish()
        for stage in reversed(entered):
            # Whether the stage is a Settles, without a runtime Protocol check per stage per
            # request (typing's __instancecheck__ cost ~10% of the request's CPU).
            settle = getattr(stage, "settle", None)
            if settle is None:
                continue
            try:
                await settle(ctx)
            except Exception as err:  # one stage's failure must not skip the others' settles
                log.exception("settle of %s failed", type(stage).__name__, exc_info=err)
        if self.settled is not None:
            try:
                self.settled(ctx)
            except Exception as err:  # a side request that cannot start must not fail the answer
                log.exception("after-settle work failed", exc_info=err)


class SideLane:
    """The side pipeline: calls made on a request's behalf after its answer (a cascade's shadow
    sample) are recorded and held against the same budgets as the request, then run (and an
    opted-in team's shadow answers kept for distillation). Its stages are built for each call:
    the budget stage holds that call's worst case, and the last stage runs it."""

    def __init__(
        self, ledger: LedgerWriter, metrics: Metrics, spend: SpendControl, keep_text: KeepText | None = None
    ) -> None:
        self.record = record.Record(ledger, metrics)
        self.spend = spend
        self.keep: list[Stage] = [keep_text.for_shadows()] if keep_text is not None else []

    async def handle(self, ctx: RequestContext, call: SideCall) -> Response:
        stages: list[Stage] = [self.record, HoldSideCall(self.spend, call), *self.keep, RunSideCall(call)]
        return await Pipeline(stages).handle(ctx)


class SettledStream(StreamingResponse):
    """A streamed answer that settles its request once the response is over, however it ended:
    also when the client left before the body's first chunk was asked for (an async generator
    that never started runs no `finally`, so its settling would never run)."""

    def __init__(
        self,
        response: StreamingResponse,
        body: AsyncIterator[bytes | str | memoryview],
        settle: Callable[[], Awaitable[None]],
    ) -> None:
        self.__dict__.update(response.__dict__)  # the route's status, headers and background, as they are
        self.body_iterator = body
        self.settle = settle

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            with anyio.CancelScope(shield=True):
                await self.settle()


async def settling_when_done(
    outer: AsyncIterator[bytes | str | memoryview], settled: AsyncGenerator[bytes | str | memoryview, None]
) -> AsyncIterator[bytes | str | memoryview]:
    """`outer` (a translation of `settled`), closing `settled` as soon as `outer` ends, fails or
    is abandoned: its settling runs then, not whenever the garbage collector gets to it (a
    broken translated stream held its budget until restart)."""
    try:
        async for chunk in outer:
            yield chunk
    finally:
        with anyio.CancelScope(shield=True):
            await settled.aclose()


def stamped(response: Response, ctx: RequestContext) -> Response:
    """A whole answer, in every API's shape, names the model the client asked for (as
    OpenAI-compatible gateways do; `x-costgate-model` names the one that answered) and carries
    the request's cost as `usage.cost_usd`, as a stream's last usage does."""
    if response.status_code != 200 or not response.headers.get("content-type", "").startswith("application/json"):
        return response
    body = orjson.loads(response.body)
    if not isinstance(body, dict):
        return response
    if "model" in body:
        body["model"] = ctx.asked.model
    if isinstance(body.get("usage"), dict):
        body["usage"]["cost_usd"] = format_usd(ctx.meter.cost)
    out = Response(orjson.dumps(body), media_type="application/json")
    for name, value in response.headers.items():
        if name not in ("content-length", "content-type"):
            out.headers[name] = value
    return out


def with_headers(response: Response, ctx: RequestContext) -> Response:
    """The contract headers. A streamed miss cannot know its cost when headers leave: it
    reports the cost in its final usage chunk (and an SSE comment) instead."""
    h = response.headers
    h["x-costgate-request-id"] = ctx.request_id
    h["x-costgate-cache"] = ctx.outcome.cache_status.value
    h["x-costgate-model"] = ctx.outcome.served_model or ctx.asked.model
    if ctx.dropped_params:
        h[DROPPED_HEADER] = dropped_header(ctx.dropped_params)
    if ctx.decided.headroom is not None:  # a key on a plan with per-minute limits
        anthropic = ctx.api is Api.MESSAGES
        h.update(ratelimit.limit_headers(ctx.decided.headroom, anthropic))
    if ctx.compressed_tokens:
        h["x-costgate-compressed-tokens"] = str(ctx.compressed_tokens)
    if not isinstance(response, StreamingResponse) or ctx.outcome.cache_status is not CacheStatus.MISS:
        h["x-costgate-cost-usd"] = format_usd(ctx.meter.cost)
    return response
