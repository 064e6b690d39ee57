"""OpenTelemetry (issue 28 item 5): with the standard OTEL_* variables set, a span for each
request and each upstream call arrives over OTLP with the GenAI semantic conventions'
attributes and the cost; the client's `traceparent` is continued and passed to the provider;
without the variables nothing is exported. The receiver is a real OTLP/HTTP endpoint in this
process that decodes the protobuf `ExportTraceServiceRequest`."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import orjson
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span as SpanProto

from gateway.upstream.tracing import build_tracing, exporting
from tests.gateway.in_process import chat_answer, new_key, openai_client, openai_model, running_app, settings_for

HI = [{"role": "user", "content": "hi"}]
CLIENT_TRACE = "0af7651916cd43dd8448eb211c80319c"
CLIENT_SPAN = "b7ad6b7169203331"
TRACEPARENT = f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"


def value_of(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [value_of(v) for v in any_value.array_value.values]
    return getattr(any_value, kind) if kind else None


class OtlpReceiver:
    """POST /v1/traces: the spans of every export, decoded."""

    def __init__(self) -> None:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                request = ExportTraceServiceRequest.FromString(raw)
                with outer.lock:
                    outer.paths.append(self.path)
                    for resource_spans in request.resource_spans:
                        for scope_spans in resource_spans.scope_spans:
                            outer.spans.extend(scope_spans.spans)
                body = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                return None

        self.lock = threading.Lock()
        self.spans: list[SpanProto] = []
        self.paths: list[str] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def attributes(self, span: SpanProto) -> dict[str, Any]:
        return {a.key: value_of(a.value) for a in span.attributes}

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    r = OtlpReceiver()
    yield r
    r.stop()


def upstream_recording(seen: list[httpx.Request]) -> httpx.MockTransport:
    def upstream(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if orjson.loads(request.content).get("stream"):
            chunks = [
                {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "upstream-model",
                 "choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]},
                {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "upstream-model", "choices": [],
                 "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}},
            ]  # fmt: skip
            sse = b"".join(b"data: " + orjson.dumps(c) + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
            return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=sse)
        return httpx.Response(200, json=chat_answer(prompt=5, completion=2))

    return httpx.MockTransport(upstream)


@pytest.fixture
async def traced_app(
    tmp_path, receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[Any, list[httpx.Request]]]:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    seen: list[httpx.Request] = []
    settings = settings_for(tmp_path, [openai_model("m", model="gpt-up")])
    async with running_app(settings, upstream_recording(seen)) as app:
        yield app, seen


@pytest.mark.parametrize("stream", [False, True])
async def test_genai_spans_arrive_over_otlp_in_the_clients_trace(
    traced_app: tuple[Any, list[httpx.Request]], receiver: OtlpReceiver, stream: bool
) -> None:
    app, seen = traced_app
    client = openai_client(app, await new_key(app))
    extra = {"extra_headers": {"traceparent": TRACEPARENT}}
    if stream:
        chunks = await client.chat.completions.create(model="m", messages=HI, stream=True, **extra)
        request_id = chunks.response.headers["x-request-id"]
        async for _ in chunks:
            pass
    else:
        request_id = (await client.chat.completions.create(model="m", messages=HI, **extra))._request_id
    await asyncio.to_thread(app.state.gateway.tracing.provider.force_flush)  # what the batch holds goes out now
    for _ in range(100):
        if len(receiver.spans) >= 2:
            break
        await asyncio.sleep(0.05)

    assert receiver.paths and all(p == "/v1/traces" for p in receiver.paths)
    [request] = [s for s in receiver.spans if s.kind == SpanProto.SPAN_KIND_SERVER]
    [upstream] = [s for s in receiver.spans if s.kind == SpanProto.SPAN_KIND_CLIENT]
    assert request.trace_id.hex() == upstream.trace_id.hex() == CLIENT_TRACE  # the client's trace, continued
    assert request.parent_span_id.hex() == CLIENT_SPAN
    assert upstream.parent_span_id == request.span_id
    assert request.name == "chat m" and upstream.name == "chat gpt-up"

    attrs = receiver.attributes(request)
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.request.model"] == attrs["gen_ai.response.model"] == "m"
    assert (attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.output_tokens"]) == (5, 2)
    assert attrs["costgate.cost_usd"] == pytest.approx(0.000009)  # 5 x $1/M + 2 x $2/M
    assert attrs["costgate.request_id"] == request_id
    assert attrs["http.response.status_code"] == 200

    up = receiver.attributes(upstream)
    assert up["gen_ai.provider.name"] == up["gen_ai.system"] == "openai"
    assert up["gen_ai.request.model"] == "gpt-up" and up["gen_ai.response.model"] == "upstream-model"
    assert (up["gen_ai.usage.input_tokens"], up["gen_ai.usage.output_tokens"]) == (5, 2)
    assert up["gen_ai.response.finish_reasons"] == ["stop"]

    # the provider was sent the upstream span's context: it can join the same trace
    assert seen[-1].headers["traceparent"] == f"00-{CLIENT_TRACE}-{upstream.span_id.hex()}-01"


async def test_a_failed_upstream_call_is_an_error_span(
    tmp_path, receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
    failing = httpx.MockTransport(lambda request: httpx.Response(500, json={"error": {"message": "boom"}}))
    async with running_app(settings_for(tmp_path, [openai_model("m")]), failing) as app:
        client = openai_client(app, await new_key(app))
        with pytest.raises(Exception):  # noqa: B017 (any error: the span is what is checked)
            await client.chat.completions.create(model="m", messages=HI)
    [upstream] = [s for s in receiver.spans if s.kind == SpanProto.SPAN_KIND_CLIENT]
    [request] = [s for s in receiver.spans if s.kind == SpanProto.SPAN_KIND_SERVER]
    assert upstream.status.code == request.status.code == 2  # STATUS_CODE_ERROR
    assert receiver.attributes(request)["http.response.status_code"] == 502


async def test_nothing_is_exported_without_the_variables(tmp_path, receiver: OtlpReceiver, monkeypatch) -> None:
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    seen: list[httpx.Request] = []
    async with running_app(settings_for(tmp_path, [openai_model("m")]), upstream_recording(seen)) as app:
        assert app.state.gateway.tracing is None
        client = openai_client(app, await new_key(app))
        await client.chat.completions.create(model="m", messages=HI, extra_headers={"traceparent": TRACEPARENT})
    assert receiver.spans == []
    assert seen[-1].headers["traceparent"] == TRACEPARENT  # passed on as the client sent it


@pytest.mark.parametrize(
    "environ, on",
    [
        ({}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_SDK_DISABLED": "true"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_TRACES_EXPORTER": "none"}, False),
        ({"OTEL_SERVICE_NAME": "gw"}, False),  # a name alone exports nothing
    ],
)
def test_which_variables_turn_export_on(environ: dict[str, str], on: bool) -> None:
    assert exporting(environ) is on
    if not on:
        assert build_tracing(environ) is None
