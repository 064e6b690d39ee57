"""Calling a deployment that serves the client's API itself (config `apis`: responses,
messages), and charging the request for it.

The client's own body (`ctx.native`) goes through that API's allow-list
(gateway/core/request_fields.py) and gateway/apis' `native_body` (the deployment's model name; for
the Responses API the conversation costgate resolved, with `store: false`). The answer is
relayed as it came, with `ctx.native_answer` set so the answer shape leaves it alone; its usage
is read with that API's own helpers, and the request charged like any call. The chat answer it
stands for is kept as `ctx.response_body`, so the response cache works as for any answer.

A stream is relayed event by event (each with its `event:` line). Its closing events are held
(gateway/core/sse.StreamEnd) until the request is settled, and carry the cost in their usage as
`cost_usd`; a budget's stream meter counts the generated text and, at the hold, ends the stream
with the API's error event, as a chat stream ends at `finish_reason: length`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any, Protocol

import anyio
import orjson

from gateway.apis.anthropic import messages_native
from gateway.apis.anthropic.anthropic_errors import error_type
from gateway.apis.responses import responses_native
from gateway.core.bodies import Field, add_generated
from gateway.core.context import Api, Endpoint, RequestContext
from gateway.core.errors import BudgetExceeded, GatewayError
from gateway.core.request_fields import without_billed_tools
from gateway.core.sse import StreamEnd
from gateway.core.tokens import count_delta, count_text
from gateway.providers.base import Completion, UpstreamCall, UpstreamStream
from gateway.upstream import tracing
from gateway.upstream.calls import billed_if_unread, billed_premium, billed_tier, charge, worst_usage
from gateway.upstream.deployments import Deployment
from gateway.upstream.server_tools import Uses, capped
from gateway.upstream.worst_case import StreamMeter, cut_reason, tool_fees_bound
from policies.pricing import Tier, Usage, format_usd

BLOCK_KEYS = ("index", "output_index", "content_index")  # where an event's block sits (Messages; Responses)


class StreamUsage(Protocol):
    @property
    def usage(self) -> Usage | None: ...

    @property
    def complete(self) -> bool:
        """The stream reported its last count (not only a first one, before any output)."""
        ...

    def feed(self, event: Any) -> None: ...


@dataclass(frozen=True, slots=True)
class NativeApi:
    """What costgate knows of one API served natively (gateway/apis/*/*_native.py)."""

    endpoint: Endpoint
    usage_of: Callable[[Any], Usage | None]  # a whole answer's usage
    stream_usage: Callable[[], StreamUsage]
    chat_answer: Callable[[Any], dict[str, Any]]
    generated_text: Callable[[Any], str]  # all a whole answer generated, counted when it has no usage
    finish_of: Callable[[dict[str, Any]], str | None]  # the chat finish_reason a stream event ends with
    event_text: Callable[[dict[str, Any]], tuple[str, str]]
    held: Callable[[dict[str, Any]], bool]
    priced: Callable[[dict[str, Any], str], dict[str, Any]]
    error_event: Callable[[GatewayError], dict[str, Any]]
    as_asked: Callable[[dict[str, Any], dict[str, Any]], bool]  # mend what costgate rewrote; True if it did


def _messages_error(err: GatewayError) -> dict[str, Any]:
    return messages_native.error_event(error_type(err.status), err.message)


NATIVE = {
    Api.RESPONSES: NativeApi(
        Endpoint.RESPONSES,
        responses_native.usage_of_response,
        responses_native.StreamUsage,
        responses_native.chat_answer,
        responses_native.generated_text,
        responses_native.finish_of,
        responses_native.event_text,
        responses_native.held,
        responses_native.priced,
        lambda err: responses_native.error_event(err.code or "server_error", err.message),
        responses_native.as_asked,
    ),
    Api.MESSAGES: NativeApi(
        Endpoint.MESSAGES,
        messages_native.usage_of_message,
        messages_native.StreamUsage,
        messages_native.chat_answer,
        messages_native.generated_text,
        messages_native.finish_of,
        messages_native.event_text,
        messages_native.held,
        messages_native.priced,
        _messages_error,
        lambda _event, _body: False,
    ),
}


def serves_natively(ctx: RequestContext, dep: Deployment) -> bool:
    return ctx.native is not None and ctx.native.api.value in dep.config.native_apis


def native_body(ctx: RequestContext, dep: Deployment) -> dict[str, Any]:
    native = ctx.native
    assert native is not None
    # litellm takes body fields as keyword arguments: allow-listed there (gateway/core/request_fields.py)
    litellm = dep.config.provider == "litellm"
    body, dropped = dep.fields.split(native.api.value, native.body) if litellm else dep.fields.native(native.body)
    # tools the provider bills per use: left out, but those the config prices, capped
    body, billed = without_billed_tools(native.api.value, body, frozenset(dep.server_tools))
    body = capped(native.api.value, body, dep.server_tools)
    ctx.dropped_params.update(dropped + billed)
    model = dep.config.upstream_model
    if native.api is Api.RESPONSES:
        return dep.caching.responses(responses_native.native_body(body, model, native.history), ctx.principal)
    return dep.caching.messages(messages_native.native_body(body, model), ctx.principal)


async def call_native(ctx: RequestContext, dep: Deployment) -> Completion:
    assert ctx.native is not None
    api = NATIVE[ctx.native.api]
    call = UpstreamCall(api.endpoint, native_body(ctx, dep), priority=ctx.decided.priority, headers=ctx.native.headers)
    tools = tool_fees_bound(ctx, dep)  # what its provider-run tools can cost, if unread
    with billed_if_unread(ctx, dep, lambda: worst_usage(ctx, dep), tools):
        completion = await tracing.complete(ctx, dep, call)
    ctx.meter.call_answered()
    usage = api.usage_of(completion.body)
    with billed_if_unread(ctx, dep, lambda: usage or worst_usage(ctx, dep), tools):  # billed, answer or not
        answer = api.chat_answer(completion.body)
    ctx.outcome.answered(answer)
    fees = Uses(ctx.native.api.value).of_answer(completion.body).fee(dep.server_tools)
    charge(
        ctx,
        dep,
        usage,
        api.generated_text(completion.body) if usage is None else "",
        billed_tier(completion.body),
        fees,
        billed_premium(completion.body.get("usage"), dep.price),
    )
    ctx.outcome.served_by(dep.name, dep.config.provider, native=True)
    if api.as_asked(completion.body, ctx.native.body):
        return Completion(completion.body, orjson.dumps(completion.body), completion.usage)
    return completion


async def open_native_relay(ctx: RequestContext, dep: Deployment) -> AsyncIterator[bytes]:
    """Open the stream now (so failures before the first byte can fall back), then relay it."""
    assert ctx.native is not None
    api = NATIVE[ctx.native.api]
    call = UpstreamCall(
        api.endpoint, native_body(ctx, dep), True, priority=ctx.decided.priority, headers=ctx.native.headers
    )
    with billed_if_unread(ctx, dep, lambda: worst_usage(ctx, dep), tool_fees_bound(ctx, dep)):
        stream = await tracing.open_stream(ctx, dep, call)
    ctx.meter.call_answered()
    ctx.outcome.served_by(dep.name, dep.config.provider, native=True)
    return _relay(ctx, dep, api, stream)


def _framed(event: dict[str, Any], raw: bytes | None = None) -> bytes:
    data = raw if raw is not None else orjson.dumps(event)
    return b"event: " + str(event.get("type")).encode() + b"\ndata: " + data + b"\n\n"


async def _relay(ctx: RequestContext, dep: Deployment, api: NativeApi, stream: UpstreamStream) -> AsyncIterator[bytes]:
    usage, held, native = api.stream_usage(), [], ctx.native
    assert native is not None
    meter = StreamMeter.for_call(ctx, dep)  # None when no budget holds the request
    model = dep.config.upstream_model
    failed, cut = True, False
    field: Field | None = None  # the content block the last generated piece belonged to
    tier = Tier.STANDARD  # as a Response in the stream's events says it was served
    premium: Decimal | None = None  # as a Message's usage in its events says (billed_premium)
    uses = Uses(native.api.value)  # the provider-run tools' uses (server_tools.py)
    try:
        async for event in stream:
            data = event.data
            usage.feed(data)
            uses.feed(data)
            if isinstance(response := data.get("response"), dict) and "service_tier" in response:
                tier = billed_tier(response)
            message = data.get("message")  # Messages' message_start; message_delta carries usage itself
            premium = billed_premium(data.get("usage"), dep.price, premium)
            premium = billed_premium(message.get("usage") if isinstance(message, dict) else None, dep.price, premium)
            text, other = api.event_text(data)
            if text or other:
                ctx.outcome.first_token(only_first=True)
            if text:
                ctx.completion_text.append(text)
            if (ending := api.finish_of(data)) is not None:
                ctx.outcome.ended(ending)
            if text or other:  # a content block is a field of its own
                block = (*(data.get(k) for k in BLOCK_KEYS), "other" if other else "text")
                field = add_generated(ctx.generated, [(block, text + other)], field)
            mended = api.as_asked(data, native.body)
            if api.held(data):
                held.append(data)
            else:
                yield _framed(data, None if mended else event.raw)
            if meter is not None and (text or other):
                meter.tokens += count_delta(text + other, model)
                if meter.over and not held:
                    cut = True
                    break
        failed = False
    except GatewayError as err:
        ctx.outcome.failed(err.status, err.message)
        yield _framed(api.error_event(err))
    finally:
        with anyio.CancelScope(shield=True):
            await stream.aclose()
            final = usage.usage
            if cut and meter is not None:  # the upstream reports nothing: charge what was counted
                final = meter.usage()
            elif final is not None and not usage.complete:  # it broke off: at least what was relayed
                relayed = count_text("".join(ctx.generated), model)
                final = replace(final, completion_tokens=max(final.completion_tokens, relayed))
            charge(ctx, dep, final, ctx.generated, tier, uses.fee(dep.server_tools), premium, counted=cut)
    if failed:
        return
    if cut:
        yield _framed(api.error_event(BudgetExceeded(ctx.outcome.cut_short(cut_reason(ctx)))))
        return
    cost = format_usd(ctx.meter.cost)
    yield b": x-costgate-cost-usd=" + cost.encode() + b"\n\n"
    yield StreamEnd(b"".join(_framed(api.priced(data, cost)) for data in held))
