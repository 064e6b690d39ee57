"""Calling one deployment for a request, and charging the request for it.

`call` answers whole; `open_relay` starts a stream and hands back the relay that forwards it
event by event. Both charge `ctx` with the exact cost of the call: from the upstream's usage,
or, when an upstream sends none (or a stream is cut), from tiktoken counts. `complete` is a
call a routing policy makes with a body of its own (a tier asked for logprobs, a judge's
grading prompt, a summary): charged to `ctx` too, but it leaves `ctx.served_model` alone, since
only the call whose answer the client receives names the served model. Nothing calls these but
the guarded call (gateway/routing/guarded_call.py), which adds the breaker and the priority class.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import anyio
import orjson

from engine.admission import Priority
from gateway.core.bodies import Field, add_generated, choice_fields, generated_text
from gateway.core.context import BatchLineRef, Endpoint, RequestContext
from gateway.core.errors import GatewayError, UnreadableAnswer, UpstreamError, error_body
from gateway.core.sse import chunk_text, stream_tail
from gateway.core.sse import event as sse_event
from gateway.core.tokens import billed_prompt_tokens, count_text
from gateway.providers.base import Completion, UpstreamCall, UpstreamStream, usage_from
from gateway.providers.batch_api import ProviderBatcher
from gateway.providers.openai_compatible import PATHS, provider_refusal
from gateway.upstream import tracing
from gateway.upstream.deployments import Deployment
from gateway.upstream.worst_case import (
    StreamMeter,
    cut_reason,
    output_cap,
    prompt_bound,
    runs_tiktoken,
    unreported_prompt,
)
from policies.pricing import SERVICE_TIERS, Price, Tier, Usage, bill, format_usd


def upstream_body(ctx: RequestContext, dep: Deployment, stream: bool) -> dict[str, Any]:
    """What `dep` is sent for this request: the fields it takes (gateway/core/request_fields.py); the
    others are named in the answer's x-costgate-dropped-params header."""
    body, dropped = dep.fields.upstream(ctx.endpoint.value, ctx.sent_body, dep.config.upstream_model, stream)
    ctx.dropped_params.update(dropped)
    if ctx.native is not None:
        ctx.dropped_params.update(ctx.native.translation_dropped)
    if wants_flex(ctx, dep) and "service_tier" not in body:
        body["service_tier"] = "flex"
    return dep.caching.chat(body, ctx.principal) if ctx.endpoint is Endpoint.CHAT else body


def wants_flex(ctx: RequestContext, dep: Deployment) -> bool:
    """A batch-class request to a model whose config allows its provider's flex tier."""
    return dep.config.flex and dep.price.flex is not None and ctx.decided.priority is Priority.BATCH


def billed_tier(answer: dict[str, Any]) -> Tier:
    """The tier the provider says it served at (OpenAI's `service_tier` in the answer, a chunk or
    a Response: `flex`, `priority` or `fast`, `ultrafast`; `default`, `auto`, `scale`: list price).
    A project whose default tier is priority is billed at it whatever the request asked: the
    answer says so."""
    served = answer.get("service_tier")
    return SERVICE_TIERS.get(served, Tier.STANDARD) if isinstance(served, str) else Tier.STANDARD


def billed_premium(usage: Any, price: Price, current: Decimal | None = None) -> Decimal | None:
    """The premium the provider says it billed a call at: the region and speed an Anthropic
    answer's usage names (`inference_geo`, `speed`: in a whole answer, a stream's first event,
    a chat answer through litellm), at the model's factors (`Price.premium`); None when it names
    neither (`current`: what an earlier event of the same stream said)."""
    if not price.premiums or not isinstance(usage, dict):
        return current
    geo, speed = usage.get("inference_geo"), usage.get("speed")
    if not isinstance(geo, str) and not isinstance(speed, str):
        return current
    return price.premium(geo if isinstance(geo, str) else None, speed if isinstance(speed, str) else None)


def charge(
    ctx: RequestContext,
    dep: Deployment,
    usage: Usage | None,
    generated: str | list[str] = "",
    tier: Tier = Tier.STANDARD,
    fees: Decimal = Decimal(0),
    premium: Decimal | None = None,
    counted: bool = False,
) -> Usage:
    """Add one call's cost to the request, as its provider bills it at `tier` and `premium`
    (`billed_premium`; None: the answer named none), with `fees` (its provider-run tools' uses:
    gateway/upstream/server_tools.py). When the upstream reported no usage, its prompt at the
    hold's bound and all it generated are counted (a stream's pieces, joined only then:
    `ctx.generated`). A call whose usage the gateway `counted` itself (that one, a stream cut at
    its hold, an unreadable answer) is charged at the dearest region the model is sold in unless
    its answer named one, as it is held: the meter errs on the closed side; an answer that
    reported its usage and named none, at list price, as the provider bills it."""
    if usage is None:
        model = dep.config.upstream_model
        text = generated if isinstance(generated, str) else "".join(generated)
        usage = Usage(unreported_prompt(ctx, dep), count_text(text, model) if text else 0)
        counted = True
    if premium is None:
        premium = dep.price.dearest_region() if counted else Decimal(1)
    billed_at = tier if dep.price.at(tier) is not None else Tier.STANDARD
    billed = bill(usage, dep.price, tier, premium, datetime.now(UTC))  # off-peak hours: as the call ends
    if fees:
        billed = replace(billed, cost=billed.cost + fees)
    ctx.meter.add_call(dep.name, usage, billed, ctx.lane_factor(dep.config.provider), billed_at)
    return usage


def worst_usage(ctx: RequestContext, dep: Deployment) -> Usage:
    """A call's usage at its hold's bound: the prompt as the hold counted it, every completion
    at its cap."""
    return Usage(prompt_bound(ctx, dep), ctx.view.completions * output_cap(ctx, dep))


@contextmanager
def billed_if_unread(
    ctx: RequestContext, dep: Deployment, usage: Callable[[], Usage], fees: Decimal = Decimal(0)
) -> Iterator[None]:
    """An answer the upstream sent as 2xx but the gateway cannot read (`UnreadableAnswer`) was
    billed by the provider all the same: the call is charged `usage()`, its worst case, and
    `fees` (its provider-run tools' at their cap) before the error goes on (to a fallback, or to
    the client). The meter fails closed."""
    try:
        yield
    except UnreadableAnswer:
        charge(ctx, dep, usage(), fees=fees, counted=True)
        raise


async def call(ctx: RequestContext, dep: Deployment) -> Completion:
    if ctx.batch_line is not None and dep.batcher is not None:
        return await call_in_batch(ctx, dep, ctx.batch_line, dep.batcher)
    with billed_if_unread(ctx, dep, lambda: worst_usage(ctx, dep)):
        completion = await tracing.complete(
            ctx, dep, UpstreamCall(ctx.endpoint, upstream_body(ctx, dep, False), priority=ctx.decided.priority)
        )
    ctx.meter.call_answered()
    text = generated_text(completion.body) if completion.usage is None else ""
    premium = billed_premium(completion.body.get("usage"), dep.price)
    charge(ctx, dep, completion.usage, text, billed_tier(completion.body), premium=premium)
    ctx.outcome.served_by(dep.name, dep.config.provider)
    return completion


async def call_in_batch(
    ctx: RequestContext, dep: Deployment, line: BatchLineRef, batcher: ProviderBatcher
) -> Completion:
    """A Batch API line answered by its provider's own Batch API, charged at its batch price
    (issue 26). The line's hold stays in place while the provider works (hours, at most its
    completion window); what it did not answer raises before anything is charged."""
    answer = await batcher.answer(line, "/v1" + PATHS[ctx.endpoint], upstream_body(ctx, dep, False))
    raw = orjson.dumps(answer.body)
    if answer.status_code >= 300:
        if answer.status_code < 500 and answer.status_code != 429:
            raise provider_refusal(answer.status_code, raw)
        raise UpstreamError(f"the provider's batch answered this line {answer.status_code}")
    ctx.meter.call_answered()
    usage = usage_from(answer.body.get("usage"))
    text = generated_text(answer.body) if usage is None else ""
    charge(ctx, dep, usage, text, Tier.BATCH, premium=billed_premium(answer.body.get("usage"), dep.price))
    ctx.outcome.served_by(dep.name, dep.config.provider)
    return Completion(answer.body, raw, usage)


async def open_relay(ctx: RequestContext, dep: Deployment) -> AsyncIterator[bytes]:
    """Open the stream now (so failures before the first byte can fall back), then relay it."""
    with billed_if_unread(ctx, dep, lambda: worst_usage(ctx, dep)):
        stream = await tracing.open_stream(
            ctx, dep, UpstreamCall(ctx.endpoint, upstream_body(ctx, dep, True), True, priority=ctx.decided.priority)
        )
    ctx.meter.call_answered()
    ctx.outcome.served_by(dep.name, dep.config.provider)
    return _relay(ctx, dep, stream)


def as_asked(raw: bytes, data: dict[str, Any], asked: str) -> bytes:
    """A chunk naming the model the client asked for, as whole answers do (gateway/pipeline.py
    stamped); `data` (its parsed form) is renamed too. The name is swapped in the bytes: a
    quote inside any string value is escaped, so only the key itself can match."""
    model = data.get("model")
    if model is None or model == asked:
        return raw
    data["model"] = asked
    upstream = b'"model":' + orjson.dumps(model)
    if upstream in raw:
        return raw.replace(upstream, b'"model":' + orjson.dumps(asked), 1)
    return orjson.dumps(data)  # written some other way ("model": "x"): written again


async def _relay(ctx: RequestContext, dep: Deployment, stream: UpstreamStream) -> AsyncIterator[bytes]:
    usage: Usage | None = None
    tier = Tier.STANDARD
    premium: Decimal | None = None  # as a usage chunk says (billed_premium)
    reported_raw: Any = None  # the upstream's own usage object, whose details the tail keeps
    last: dict[str, Any] = {}
    failed, cut = True, False
    field: Field | None = None  # the field the last generated piece belonged to
    meter = StreamMeter.for_call(ctx, dep)  # None when no budget holds the request
    try:
        async for event in stream:
            data = event.data
            raw = as_asked(event.raw, data, ctx.asked.model)
            reported = usage_from(data.get("usage"))
            choices = data.get("choices")
            if choices:
                ctx.outcome.first_token(only_first=True)
                if isinstance(choices[0], dict) and isinstance(choices[0].get("finish_reason"), str):
                    ctx.outcome.ended(choices[0]["finish_reason"])
            text = chunk_text(ctx.endpoint, data)
            if text:
                ctx.completion_text.append(text)
            generated = list(choice_fields(choices))  # read once: the charge's count and the meter's
            field = add_generated(ctx.generated, generated, field)
            last = data
            tier = billed_tier(data) if "service_tier" in data else tier
            if reported is None:
                yield b"data: " + raw + b"\n\n"
            else:
                usage, reported_raw = reported, data["usage"]
                premium = billed_premium(reported_raw, dep.price, premium)
                if choices:  # usage riding on a content chunk: forward the content only
                    yield sse_event({k: v for k, v in data.items() if k != "usage"})
            if meter is not None:
                meter.feed(data, generated, dep.config.upstream_model)
                if meter.over and usage is None:
                    cut = True
                    break
        if cut:
            assert meter is not None
            await stream.aclose()  # now, not after the client has read the ending
            for tail in _cut_tail(ctx, meter, last):
                yield tail
        failed = False
    except GatewayError as err:
        ctx.outcome.failed(err.status, err.message)
        yield b"data: " + error_body(err) + b"\n\n"
    finally:
        with anyio.CancelScope(shield=True):
            await stream.aclose()
            if cut and meter is not None:  # the upstream reports nothing: charge what was counted
                usage = meter.usage()
            final = charge(ctx, dep, usage, ctx.generated, tier, premium=premium, counted=cut)
    if failed:
        return
    for tail in stream_tail(last, final, format_usd(ctx.meter.cost), ctx.view.include_usage, reported_raw):
        yield tail


def _cut_tail(ctx: RequestContext, meter: StreamMeter, last: dict[str, Any]) -> list[bytes]:
    """A stream ended at its hold ends as one that reached max_tokens: `finish_reason: length`
    for each open choice, then a comment that says why (the usage chunk and [DONE] follow)."""
    reason = ctx.outcome.cut_short(cut_reason(ctx))
    return [
        *(sse_event(chunk) for chunk in meter.closing_chunks(ctx.endpoint, last)),
        b": costgate: " + reason.encode() + b"\n\n",
    ]


async def complete(
    ctx: RequestContext, dep: Deployment, body: dict[str, Any], endpoint: Endpoint | None = None
) -> Completion:
    endpoint = endpoint or ctx.endpoint
    body, _ = dep.fields.split(endpoint.value, body)  # only what the deployment takes (request_fields.py)
    model = dep.config.upstream_model

    def prompt() -> int:  # this call's own body, not the client's, at the bound a hold counts
        return billed_prompt_tokens(body, model, runs_tiktoken(dep))  # only when no usage came

    with billed_if_unread(ctx, dep, lambda: Usage(prompt(), own_cap(body, dep))):
        completion = await tracing.complete(ctx, dep, UpstreamCall(endpoint, body, priority=ctx.decided.priority))
    ctx.meter.call_answered()
    usage = completion.usage
    counted = usage is None
    if usage is None:
        usage = Usage(prompt(), count_text(generated_text(completion.body), model))
    premium = billed_premium(completion.body.get("usage"), dep.price)
    charge(ctx, dep, usage, tier=billed_tier(completion.body), premium=premium, counted=counted)
    return completion


def own_cap(body: dict[str, Any], dep: Deployment) -> int:
    """The most output a policy's own call can bill: its body's limit, else the model's."""
    asked = body.get("max_completion_tokens") or body.get("max_tokens") or body.get("max_output_tokens")
    return min(int(asked), dep.max_output_tokens) if isinstance(asked, int) and asked > 0 else dep.max_output_tokens
