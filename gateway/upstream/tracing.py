"""OpenTelemetry: a span for each request and one for each upstream call, with the GenAI
semantic conventions' attributes and the cost, exported over OTLP.

Exported only when the standard variables ask for it: `OTEL_EXPORTER_OTLP_ENDPOINT` (or
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) set, `OTEL_SDK_DISABLED` not `true`, `OTEL_TRACES_EXPORTER`
not `none`. The exporter, the batch processor and the sampler read the other `OTEL_*` variables
themselves (headers, timeouts, protocol, `OTEL_SERVICE_NAME`, `OTEL_TRACES_SAMPLER`). Without
them `build_tracing` returns None and a request pays one header lookup: the client's
`traceparent`, if it sent one, is passed on to the provider as it came.

With tracing on, the request's span (SERVER) continues the client's trace (`traceparent`), each
upstream call's span (CLIENT) is its child, and the provider gets that span's `traceparent`, so a
provider that traces joins the same trace.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from gateway.core.context import Endpoint, RequestContext
from gateway.core.errors import GatewayError
from gateway.providers.base import Completion, StreamEvent, UpstreamCall, UpstreamStream, usage_from
from gateway.upstream.deployments import Deployment
from policies.pricing import Usage

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

log = logging.getLogger("costgate.tracing")
PROPAGATOR = TraceContextTextMapPropagator()
TRACE_HEADERS = ("traceparent", "tracestate")
OPERATIONS = {  # gen_ai.operation.name
    Endpoint.CHAT: "chat",
    Endpoint.COMPLETIONS: "text_completion",
    Endpoint.EMBEDDINGS: "embeddings",
    Endpoint.RESPONSES: "chat",
    Endpoint.MESSAGES: "chat",
}
REQUEST_PARAMS = {  # body field -> gen_ai.request.* attribute
    "max_tokens": "gen_ai.request.max_tokens",
    "max_completion_tokens": "gen_ai.request.max_tokens",
    "temperature": "gen_ai.request.temperature",
    "top_p": "gen_ai.request.top_p",
    "seed": "gen_ai.request.seed",
}


def exporting(environ: Mapping[str, str]) -> bool:
    """Whether the standard OTEL_* variables ask for spans over OTLP."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() == "none":
        return False
    return bool(environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))


def build_tracing(environ: Mapping[str, str]) -> Tracing | None:
    if not exporting(environ):
        return None
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    protocol = environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
    exporter: Any
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

        exporter = GrpcExporter()
    else:  # http/protobuf, the specification's default
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter()
    # OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, when set, name the service instead.
    named = "OTEL_SERVICE_NAME" in environ or "service.name=" in environ.get("OTEL_RESOURCE_ATTRIBUTES", "")
    provider = TracerProvider(resource=Resource.create({} if named else {"service.name": "costgate"}))
    provider.add_span_processor(BatchSpanProcessor(exporter))  # off the request path
    return Tracing(provider)


class Tracing:
    """The tracer of one gateway (its own provider: nothing global is set)."""

    def __init__(self, provider: TracerProvider) -> None:
        self.provider = provider
        self.tracer = provider.get_tracer("costgate")

    def start(self, ctx: RequestContext) -> RequestTrace:
        """The request's span, continuing the client's trace when it sent a `traceparent`."""
        parent = PROPAGATOR.extract(ctx.headers) if "traceparent" in ctx.headers else None
        span = self.tracer.start_span(f"costgate {ctx.endpoint.value}", parent, SpanKind.SERVER)
        span.set_attribute("costgate.request_id", ctx.request_id)
        return RequestTrace(self.tracer, span, format(span.get_span_context().trace_id, "032x"))

    def shutdown(self) -> None:
        self.provider.shutdown()  # exports what is still queued


@dataclass(frozen=True, slots=True)
class RequestTrace:
    tracer: trace.Tracer
    span: trace.Span
    trace_id: str  # hex, as the access log writes it

    def finish(self, ctx: RequestContext) -> None:
        span = self.span
        operation = OPERATIONS[ctx.endpoint]
        span.update_name(f"{operation} {ctx.asked.model}" if ctx.asked.model else operation)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": operation,
            "gen_ai.usage.input_tokens": ctx.meter.usage.prompt_tokens,
            "gen_ai.usage.output_tokens": ctx.meter.usage.completion_tokens,
            "costgate.cost_usd": float(ctx.meter.cost),
            "costgate.saved_usd": float(ctx.meter.saved),
            "costgate.cache": ctx.outcome.cache_status.value,
            "costgate.stream": ctx.asked.stream,
            "http.response.status_code": ctx.outcome.status_code,
        }
        optional = {
            "gen_ai.request.model": ctx.asked.model or None,
            "gen_ai.response.model": ctx.outcome.served_model,
            "costgate.team": ctx.principal.team_name if ctx.principal else None,
            "costgate.key_id": ctx.principal.key_id if ctx.principal else None,
            "costgate.cascade_tier": ctx.outcome.cascade_tier,
            "costgate.api": ctx.api.value if ctx.api is not None else None,
        }
        attributes.update({k: v for k, v in optional.items() if v is not None})
        span.set_attributes(attributes)
        if ctx.outcome.status_code >= 400:
            span.set_attribute("error.type", str(ctx.outcome.status_code))
            if ctx.outcome.status_code >= 500:
                span.set_status(Status(StatusCode.ERROR, ctx.outcome.error))
        span.end()

    def upstream(self, dep: Deployment, call: UpstreamCall) -> UpstreamSpan:
        """A child span for one call to `dep`; the call goes out with its `traceparent`."""
        operation = OPERATIONS[call.endpoint]
        model = str(call.body.get("model") or dep.config.upstream_model)
        span = self.tracer.start_span(f"{operation} {model}", trace.set_span_in_context(self.span), SpanKind.CLIENT)
        system = provider_name(dep)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": operation,
            "gen_ai.provider.name": system,
            "gen_ai.system": system,  # the name before semantic conventions 1.37
            "gen_ai.request.model": model,
            "costgate.deployment": dep.name,
        }
        for name, attribute in REQUEST_PARAMS.items():
            value = call.body.get(name)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                attributes[attribute] = value
        span.set_attributes(attributes)
        headers: dict[str, str] = {}
        PROPAGATOR.inject(headers, trace.set_span_in_context(span))
        return UpstreamSpan(span, replace(call, headers=call.headers + tuple(headers.items())))


def provider_name(dep: Deployment) -> str:
    """gen_ai.provider.name: litellm's provider prefix (`anthropic/claude-…`), vLLM for the
    bundled engine, else OpenAI's API."""
    config = dep.config
    if config.provider == "litellm" and "/" in config.upstream_model:
        return config.upstream_model.split("/", 1)[0]
    return "vllm" if config.provider == "local" else "openai"


@dataclass(frozen=True, slots=True)
class UpstreamSpan:
    span: trace.Span
    call: UpstreamCall  # the call as sent: with the span's traceparent

    def answered(self, body: dict[str, Any], usage: Usage | None) -> None:
        span = self.span
        if span.is_recording():
            attributes: dict[str, Any] = {}
            if isinstance(body.get("model"), str):
                attributes["gen_ai.response.model"] = body["model"]
            if isinstance(body.get("id"), str):
                attributes["gen_ai.response.id"] = body["id"]
            reasons = [c.get("finish_reason") for c in body.get("choices") or () if isinstance(c, dict)]
            if any(isinstance(r, str) for r in reasons):
                attributes["gen_ai.response.finish_reasons"] = [r for r in reasons if isinstance(r, str)]
            if usage is not None:
                attributes["gen_ai.usage.input_tokens"] = usage.prompt_tokens
                attributes["gen_ai.usage.output_tokens"] = usage.completion_tokens
            span.set_attributes(attributes)
        span.end()

    def failed(self, err: GatewayError) -> None:
        self.span.set_attribute("error.type", err.code or type(err).__name__)
        self.span.set_status(Status(StatusCode.ERROR, err.message))
        self.span.end()


def passed_on(ctx: RequestContext, call: UpstreamCall) -> UpstreamCall:
    """Tracing off: the client's own trace context goes to the provider as it came."""
    if "traceparent" not in ctx.headers:
        return call
    passed = tuple((h, ctx.headers[h]) for h in TRACE_HEADERS if h in ctx.headers)
    return replace(call, headers=call.headers + passed)  # after a native API's own headers


async def complete(ctx: RequestContext, dep: Deployment, call: UpstreamCall) -> Completion:
    """`dep`'s whole answer to `call`, in its own span when the request is traced."""
    if not isinstance(ctx.trace, RequestTrace):
        return await dep.provider.complete(passed_on(ctx, call))
    upstream = ctx.trace.upstream(dep, call)
    try:
        completion = await dep.provider.complete(upstream.call)
    except GatewayError as err:
        upstream.failed(err)
        raise
    upstream.answered(completion.body, completion.usage)
    return completion


async def open_stream(ctx: RequestContext, dep: Deployment, call: UpstreamCall) -> UpstreamStream:
    """`dep`'s stream for `call`; traced, its span ends when the stream does."""
    if not isinstance(ctx.trace, RequestTrace):
        return await dep.provider.open_stream(passed_on(ctx, call))
    upstream = ctx.trace.upstream(dep, call)
    try:
        stream = await dep.provider.open_stream(upstream.call)
    except GatewayError as err:
        upstream.failed(err)
        raise
    return TracedStream(stream, upstream)


class TracedStream:
    """A stream whose span ends with it: the model, id and usage its events reported."""

    def __init__(self, stream: UpstreamStream, upstream: UpstreamSpan) -> None:
        self._stream = stream
        self._upstream: UpstreamSpan | None = upstream
        self._seen: dict[str, Any] = {}
        self._usage: Usage | None = None

    async def __aiter__(self) -> AsyncIterator[StreamEvent]:
        try:
            async for event in self._stream:
                self._note(event.data)
                yield event
        except GatewayError as err:
            if self._upstream is not None:
                self._upstream.failed(err)
                self._upstream = None
            raise
        finally:
            self._end()

    def _note(self, data: dict[str, Any]) -> None:
        for name in ("model", "id"):
            if name not in self._seen and isinstance(data.get(name), str):
                self._seen[name] = data[name]
        usage = usage_from(data.get("usage"))
        if usage is not None:
            self._usage = usage
        for choice in data.get("choices") or ():
            if isinstance(choice, dict) and isinstance(choice.get("finish_reason"), str):
                self._seen.setdefault("choices", []).append({"finish_reason": choice["finish_reason"]})

    def _end(self) -> None:
        if self._upstream is not None:
            self._upstream.answered(self._seen, self._usage)
            self._upstream = None

    async def aclose(self) -> None:
        try:
            await self._stream.aclose()
        finally:
            self._end()
