"""Native passthrough (gateway/upstream/native_calls.py), in-process: a Responses or Messages request sent
as the client wrote it to a deployment that serves that API, with the upstream faked at the
provider interface. What it must do: call the API's own endpoint with the deployment's model
name, charge the usage that API reports (whole answers and streams), hold a stream's closing
events until the request is settled and price them, cut a metered stream at its budget hold with
the API's error event, and end a failed stream with that API's error event."""

from __future__ import annotations

from collections.abc import AsyncIterator
from decimal import Decimal
from typing import Any

import orjson
import pytest

from gateway.config.models_config import ModelConfig
from gateway.core.context import Api, Endpoint, NativeRequest, RequestContext
from gateway.core.errors import GatewayError, UpstreamError
from gateway.core.sse import StreamEnd
from gateway.providers.base import Completion, StreamEvent, UpstreamCall, UpstreamStream
from gateway.upstream.deployments import Deployment
from gateway.upstream.native_calls import NATIVE, call_native, open_native_relay, serves_natively
from gateway.upstream.worst_case import StreamMeter, prompt_bound
from policies.budgets import Budget, Hold, Period, Scope
from policies.pricing import PICO_USD, Price, format_usd
from tests.gateway.fakes import TEAM_A, request

pytestmark = pytest.mark.slow  # boots processes: not in the fast lane

INPUT, OUTPUT = Decimal(1) / 10**6, Decimal(2) / 10**6  # the deployment's price per token


class FakeStream:
    """An upstream stream: its events in order, then (optionally) an error; pulls and close kept."""

    def __init__(self, events: list[dict[str, Any]], error: GatewayError | None = None) -> None:
        self.events, self.error = events, error
        self.pulled = 0
        self.closed = False

    async def _iterate(self) -> AsyncIterator[StreamEvent]:
        for data in self.events:
            self.pulled += 1
            yield StreamEvent(orjson.dumps(data), data)
        if self.error is not None:
            raise self.error

    def __aiter__(self) -> AsyncIterator[StreamEvent]:
        return self._iterate()

    async def aclose(self) -> None:
        self.closed = True


class FakeUpstream:
    """A provider that serves the native APIs: one whole answer or one stream, every call kept."""

    name = "native"

    def __init__(self, answer: dict[str, Any] | None = None, stream: FakeStream | None = None) -> None:
        self.answer, self.stream = answer, stream
        self.calls: list[UpstreamCall] = []

    async def complete(self, call: UpstreamCall) -> Completion:
        self.calls.append(call)
        assert self.answer is not None
        return Completion(self.answer, orjson.dumps(self.answer), None)

    async def open_stream(self, call: UpstreamCall) -> UpstreamStream:
        self.calls.append(call)
        assert self.stream is not None
        return self.stream

    async def aclose(self) -> None:
        return None


def deployment(upstream: FakeUpstream, apis: list[str] | None = None) -> Deployment:
    config = ModelConfig(
        name="native-model",
        model="upstream-name",
        provider="openai",
        api_base="http://upstream.invalid/v1",
        apis=apis if apis is not None else ["chat", "responses", "messages"],  # type: ignore[arg-type]
        price={"input_per_mtok": "1", "output_per_mtok": "2"},
    )
    return Deployment(config, upstream, Price.per_million(Decimal(1), Decimal(2)), 4096)


def native_request(api: Api, body: dict[str, Any], stream: bool = False) -> RequestContext:
    ctx = request(principal=TEAM_A, requested_model="native-model", stream=stream)
    ctx.native = NativeRequest(api, body)
    return ctx


def response(text: str, input_tokens: int, output_tokens: int) -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "model": "upstream-name",
        "store": False,
        "previous_response_id": None,
        "output": [{"type": "message", "content": [{"type": "output_text", "text": text}]}],
        "usage": {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "input_tokens_details": {"cached_tokens": 0},
        },
    }


def message(text: str, input_tokens: int, output_tokens: int) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "upstream-name",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
    }


async def relayed(ctx: RequestContext, dep: Deployment) -> list[bytes]:
    return [chunk async for chunk in await open_native_relay(ctx, dep)]


def events(chunks: list[bytes]) -> list[tuple[str, dict[str, Any]]]:
    """(event name, data) of each SSE event in the relayed bytes, comments left out."""
    out = []
    for block in b"".join(chunks).split(b"\n\n"):
        if block.startswith(b"event: "):
            name, data = block.split(b"\n", 1)
            out.append((name.removeprefix(b"event: ").decode(), orjson.loads(data.removeprefix(b"data: "))))
    return out


def test_each_native_api_is_called_at_its_own_endpoint() -> None:
    assert NATIVE[Api.RESPONSES].endpoint is Endpoint.RESPONSES
    assert NATIVE[Api.MESSAGES].endpoint is Endpoint.MESSAGES


def test_a_deployment_serves_natively_only_the_apis_its_config_names() -> None:
    both, chat_only = deployment(FakeUpstream()), deployment(FakeUpstream(), ["chat"])
    responses_only = deployment(FakeUpstream(), ["chat", "responses"])
    ctx = native_request(Api.RESPONSES, {"model": "native-model", "input": "hi"})
    assert serves_natively(ctx, both) and serves_natively(ctx, responses_only)
    assert not serves_natively(ctx, chat_only)
    assert not serves_natively(native_request(Api.MESSAGES, {"model": "m"}), responses_only)
    assert not serves_natively(request(), both)  # a chat request: nothing native to send


async def test_a_whole_responses_answer_is_charged_its_usage_and_mended_as_asked() -> None:
    upstream = FakeUpstream(answer=response("Hello there", 1000, 500))
    dep = deployment(upstream)
    ctx = native_request(Api.RESPONSES, {"model": "native-model", "input": "hi", "store": False})
    completion = await call_native(ctx, dep)
    [call] = upstream.calls
    assert call.endpoint is Endpoint.RESPONSES and not call.stream
    assert call.body["model"] == "upstream-name" and call.body["store"] is False and call.body["input"] == "hi"
    assert ctx.meter.cost == 1000 * INPUT + 500 * OUTPUT  # the Responses usage, not a token count
    assert (ctx.meter.usage.prompt_tokens, ctx.meter.usage.completion_tokens) == (1000, 500)
    assert (
        ctx.outcome.response_body is not None
        and ctx.outcome.response_body["choices"][0]["message"]["content"] == "Hello there"
    )
    assert (ctx.outcome.served_model, ctx.outcome.provider, ctx.outcome.native_answer) == (
        "native-model",
        "openai",
        True,
    )
    # what costgate rewrote is put back as the client sent it, in the bytes relayed too
    assert completion.body["store"] is False and orjson.loads(completion.raw)["store"] is False
    ctx2 = native_request(Api.RESPONSES, {"model": "native-model", "input": "hi"})  # store left to its default
    upstream.answer = response("Hello there", 1000, 500)
    completion = await call_native(ctx2, dep)
    assert completion.body["store"] is True and orjson.loads(completion.raw)["store"] is True


async def test_a_whole_messages_answer_is_charged_its_usage_and_relayed_untouched() -> None:
    answer = message("Bonjour", 300, 40)
    upstream = FakeUpstream(answer=answer)
    ctx = native_request(Api.MESSAGES, {"model": "native-model", "max_tokens": 64, "messages": []})
    completion = await call_native(ctx, deployment(upstream))
    [call] = upstream.calls
    assert call.endpoint is Endpoint.MESSAGES and call.body["model"] == "upstream-name"
    assert ctx.meter.cost == 300 * INPUT + 40 * OUTPUT
    assert (
        ctx.outcome.response_body is not None
        and ctx.outcome.response_body["choices"][0]["message"]["content"] == "Bonjour"
    )
    assert completion.raw == orjson.dumps(answer) and ctx.outcome.native_answer


async def test_a_responses_stream_holds_its_terminal_event_until_settled_and_prices_it() -> None:
    stream = FakeStream(
        [
            {"type": "response.created", "response": {"object": "response", "id": "resp_1", "store": False}},
            {"type": "response.output_text.delta", "delta": "Hel"},
            {"type": "response.output_text.delta", "delta": "lo"},
            {"type": "response.completed", "response": response("Hello", 1000, 500)},
        ]
    )
    ctx = native_request(Api.RESPONSES, {"model": "native-model", "input": "hi", "stream": True}, stream=True)
    upstream = FakeUpstream(stream=stream)
    chunks = await relayed(ctx, deployment(upstream))
    assert upstream.calls[0].endpoint is Endpoint.RESPONSES and upstream.calls[0].stream
    cost = 1000 * INPUT + 500 * OUTPUT
    assert ctx.meter.cost == cost and ctx.completion_text == ["Hel", "lo"] and ctx.outcome.first_token_at is not None
    # the terminal event leaves last, alone, after settlement (StreamEnd), priced
    *before, end = chunks
    assert isinstance(end, StreamEnd) and not any(isinstance(c, StreamEnd) for c in before)
    assert [n for n, _ in events(before)] == ["response.created", "response.output_text.delta"] * 1 + [
        "response.output_text.delta"
    ]
    assert b": x-costgate-cost-usd=" + format_usd(cost).encode() + b"\n\n" == before[-1]
    [(name, terminal)] = events([end])
    assert name == "response.completed" and terminal["response"]["usage"]["cost_usd"] == format_usd(cost)
    # the created event was mended as asked: the client did not send store: false
    assert events(before)[0][1]["response"]["store"] is True
    assert stream.closed


async def test_a_messages_stream_holds_message_delta_and_stop_and_prices_the_delta() -> None:
    stream = FakeStream(
        [
            {"type": "message_start", "message": {"id": "msg_1", "usage": {"input_tokens": 300, "output_tokens": 1}}},
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Bon"}},
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "jour"}},
            {"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 40}},
            {"type": "message_stop"},
        ]
    )
    ctx = native_request(Api.MESSAGES, {"model": "native-model", "messages": [], "stream": True}, stream=True)
    chunks = await relayed(ctx, deployment(FakeUpstream(stream=stream)))
    cost = 300 * INPUT + 40 * OUTPUT  # input from message_start, output from the later message_delta
    assert ctx.meter.cost == cost and "".join(ctx.completion_text) == "Bonjour"
    *before, end = chunks
    assert isinstance(end, StreamEnd)
    assert [n for n, _ in events(before)] == ["message_start", "content_block_start"] + ["content_block_delta"] * 2 + [
        "content_block_stop"
    ]
    assert [n for n, _ in events([end])] == ["message_delta", "message_stop"]
    assert events([end])[0][1]["usage"]["cost_usd"] == format_usd(cost)
    # events not mended are relayed as their upstream bytes
    assert before[0] == b"event: message_start\ndata: " + orjson.dumps(stream.events[0]) + b"\n\n"


def metered(ctx: RequestContext, dep: Deployment, allowed_tokens: int) -> None:
    """A budget hold on `ctx` that leaves `allowed_tokens` of output after the prompt's bound."""
    budget = Budget(Scope.TEAM, "team_a1", Period.TOTAL, 10**15)
    want = (prompt_bound(ctx, dep) * INPUT + allowed_tokens * OUTPUT) / PICO_USD
    ctx.decided.hold = Hold("h", 0.0, (budget,), int(want))
    meter = StreamMeter.for_call(ctx, dep)
    assert meter is not None and meter.allowed == allowed_tokens


async def test_a_metered_stream_is_cut_at_its_budget_hold_with_the_apis_error_event() -> None:
    deltas = [{"type": "response.output_text.delta", "delta": " word"} for _ in range(40)]
    stream = FakeStream([*deltas, {"type": "response.completed", "response": response("x", 10, 40)}])
    upstream = FakeUpstream(stream=stream)
    dep = deployment(upstream)
    ctx = native_request(Api.RESPONSES, {"model": "native-model", "input": "hi", "stream": True}, stream=True)
    metered(ctx, dep, 5)
    chunks = await relayed(ctx, dep)
    assert stream.pulled < 10 and stream.closed  # stopped reading once over, the upstream closed
    assert not any(isinstance(c, StreamEnd) for c in chunks) and b"x-costgate-cost-usd" not in b"".join(chunks)
    *relayed_events, (name, error) = events(chunks)
    assert name == "error" and error["code"] == "budget_exceeded" and "budget hold" in error["message"]
    assert all(n == "response.output_text.delta" for n, _ in relayed_events)
    assert ctx.outcome.error is not None and ctx.outcome.error.startswith("stream cut at the budget hold")
    # the upstream reported no usage: charged the prompt as the hold counted it and the tokens metered
    counted = len(ctx.completion_text)
    assert counted == len(relayed_events) and counted >= 5
    assert ctx.meter.usage.completion_tokens >= 5 and ctx.meter.usage.prompt_tokens == prompt_bound(ctx, dep)
    assert ctx.meter.cost == ctx.meter.usage.prompt_tokens * INPUT + ctx.meter.usage.completion_tokens * OUTPUT


async def test_an_unmetered_stream_is_not_cut() -> None:
    deltas = [{"type": "response.output_text.delta", "delta": " word"} for _ in range(40)]
    stream = FakeStream([*deltas, {"type": "response.completed", "response": response("x", 10, 40)}])
    ctx = native_request(Api.RESPONSES, {"model": "native-model", "input": "hi"}, stream=True)
    chunks = await relayed(ctx, deployment(FakeUpstream(stream=stream)))
    assert stream.pulled == 41 and isinstance(chunks[-1], StreamEnd) and ctx.outcome.error is None


async def test_a_failed_responses_stream_ends_with_its_error_event_and_is_charged_what_came() -> None:
    stream = FakeStream([{"type": "response.output_text.delta", "delta": "Hel"}], UpstreamError("upstream died"))
    ctx = native_request(Api.RESPONSES, {"model": "native-model", "input": "hi"}, stream=True)
    chunks = await relayed(ctx, deployment(FakeUpstream(stream=stream)))
    assert [n for n, _ in events(chunks)] == ["response.output_text.delta", "error"]
    error = events(chunks)[-1][1]
    assert error["code"] == "bad_gateway" and error["message"] == "upstream died"
    assert (ctx.outcome.status_code, ctx.outcome.error) == (502, "upstream died")
    assert not any(isinstance(c, StreamEnd) for c in chunks) and b"x-costgate-cost-usd" not in b"".join(chunks)
    assert (
        ctx.meter.cost > 0 and ctx.meter.usage.completion_tokens > 0 and stream.closed
    )  # counted, since no usage came


async def test_a_failed_messages_stream_ends_with_its_error_event() -> None:
    stream = FakeStream([], UpstreamError("overloaded upstream"))
    stream.error.status = 503  # type: ignore[union-attr]
    ctx = native_request(Api.MESSAGES, {"model": "native-model", "messages": []}, stream=True)
    chunks = await relayed(ctx, deployment(FakeUpstream(stream=stream)))
    [(name, error)] = events(chunks)
    assert name == "error"
    assert error == {"type": "error", "error": {"type": "overloaded_error", "message": "overloaded upstream"}}
    assert ctx.outcome.status_code == 503


async def test_a_cut_stream_of_tool_arguments_is_charged_the_tokens_metered() -> None:
    deltas = [{"type": "response.function_call_arguments.delta", "delta": '"k": 1, '} for _ in range(40)]
    stream = FakeStream(deltas)
    dep = deployment(FakeUpstream(stream=stream))
    ctx = native_request(Api.RESPONSES, {"model": "native-model", "input": "hi"}, stream=True)
    metered(ctx, dep, 5)
    chunks = await relayed(ctx, dep)
    assert events(chunks)[-1][1]["code"] == "budget_exceeded" and stream.pulled < 40
    # no answer text to count: the output charged is what the meter counted of the arguments
    assert ctx.completion_text == [] and ctx.meter.usage.completion_tokens >= 5
    assert ctx.meter.cost == ctx.meter.usage.prompt_tokens * INPUT + ctx.meter.usage.completion_tokens * OUTPUT
