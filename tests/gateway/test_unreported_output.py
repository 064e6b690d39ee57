"""An upstream that reports no usage (a server that ignores `stream_options`, an odd usage read
as none) still bills every token it generated: the tool calls' names and arguments, a refusal,
reasoning, not only the answer's text. The charge counts each of them, as the hold's stream
meter does (gateway/upstream/worst_case.py), so the ledger never reads 0 output tokens for an
answer that was all tool calls. A native stream that breaks off before its last count is charged
at least what it relayed, not the one output token its first count said."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import httpx
import orjson
import pytest
import tiktoken

from gateway.apis.anthropic import messages_native
from gateway.apis.responses import responses_native
from tests.gateway.in_process import (
    anthropic_client,
    ledger_rows,
    message_answer,
    new_key,
    openai_client,
    openai_model,
    running_app,
    settings_for,
)

CLAUDE = {  # an upstream that speaks the Messages API: /v1/messages goes through natively
    "name": "claude",
    "provider": "openai",
    "model": "claude-sonnet-4-5",
    "api_base": "http://anthropic.test/v1",
    "apis": ["chat", "messages"],
    "price": {"input_per_mtok": "3", "output_per_mtok": "15"},
    "max_retries": 0,
}
ARGUMENTS = json.dumps({"city": "Reykjavik", "unit": "celsius", "days": [1, 2, 3, 4, 5, 6, 7]})
REASONING = "The user wants a week of weather; the tool takes a city and a list of days."


def tokens(text: str) -> int:
    return len(tiktoken.get_encoding("o200k_base").encode(text))


def whole_answer() -> dict[str, Any]:
    message = {
        "role": "assistant",
        "content": None,
        "reasoning_content": REASONING,
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": ARGUMENTS}}
        ],
    }
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "upstream-model",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
    }  # no usage


def stream_events() -> str:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        data = {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "upstream-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return f"data: {orjson.dumps(data).decode()}\n\n"

    call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": ""}}
    pieces = [ARGUMENTS[i : i + 8] for i in range(0, len(ARGUMENTS), 8)]
    events = [chunk({"role": "assistant", "reasoning_content": REASONING}), chunk({"tool_calls": [call]})]
    events += [chunk({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}) for p in pieces]
    events.append(chunk({}, "tool_calls"))
    return "".join(events) + "data: [DONE]\n\n"  # no usage chunk, although the gateway asked for one


def upstream(request: httpx.Request) -> httpx.Response:
    if orjson.loads(request.content).get("stream"):
        return httpx.Response(200, text=stream_events(), headers={"content-type": "text/event-stream"})
    return httpx.Response(200, json=whole_answer())


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_an_answer_of_tool_calls_without_usage_is_charged_its_output(tmp_path: Path, stream: bool) -> None:
    settings = settings_for(tmp_path, [openai_model("gpt-4o-mini")])
    async with running_app(settings, httpx.MockTransport(upstream)) as app:
        client = openai_client(app, await new_key(app))
        tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
        messages = [{"role": "user", "content": "Weather in Reykjavik this week?"}]
        if stream:
            async for _ in await client.chat.completions.create(
                model="gpt-4o-mini", messages=messages, tools=tools, stream=True
            ):
                pass
        else:
            await client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=tools)
        (row,) = await ledger_rows(app)
    generated = tokens(ARGUMENTS) + tokens("get_weather") + tokens(REASONING)
    assert row["completion_tokens"] >= generated


def message_upstream(request: httpx.Request) -> httpx.Response:
    """A Messages upstream whose usage is no usage (a negative count: tests/gateway/test_usage_counts.py)."""
    content = [
        {"type": "thinking", "thinking": REASONING, "signature": "sig"},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": json.loads(ARGUMENTS)},
    ]
    usage = {"input_tokens": -1, "output_tokens": 61}
    return httpx.Response(200, json=message_answer(usage, content, model="claude-sonnet-4-5", stop="tool_use"))


async def test_a_native_message_of_tool_use_without_usage_is_charged_its_output(tmp_path: Path) -> None:
    async with running_app(settings_for(tmp_path, [CLAUDE]), httpx.MockTransport(message_upstream)) as app:
        client = anthropic_client(app, await new_key(app))
        await client.messages.create(
            model="claude", max_tokens=200, messages=[{"role": "user", "content": "Weather in Reykjavik this week?"}]
        )
        (row,) = await ledger_rows(app)
    compact = orjson.dumps(json.loads(ARGUMENTS)).decode()  # the input as a Message carries it, parsed
    assert row["completion_tokens"] >= tokens(compact) + tokens("get_weather") + tokens(REASONING)


def test_what_a_native_answer_generated() -> None:
    message = {
        "content": [
            {"type": "thinking", "thinking": "hmm", "signature": "c2ln"},
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"x": 1}},
        ]
    }
    assert messages_native.generated_text(message) == 'hmm\nLet me look.\nf\n{"x":1}'
    response = {
        "output": [
            {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "plan"}]},
            {
                "type": "message",
                "content": [{"type": "output_text", "text": "Sure."}, {"type": "refusal", "refusal": "no"}],
            },
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": '{"x":1}'},
        ]
    }
    assert responses_native.generated_text(response) == 'plan\nSure.\nno\nf\n{"x":1}'
    summary = {"type": "response.reasoning_summary_text.delta", "output_index": 0, "delta": "plan"}
    assert responses_native.event_text(summary) == ("", "plan")  # a stream counts it too


class BrokenStream(httpx.AsyncByteStream):
    """A Messages stream that breaks after its text deltas: no message_delta, so the only usage
    it carried is message_start's (output_tokens 1), before anything was generated."""

    def __init__(self, words: int) -> None:
        self.words = words

    async def __aiter__(self) -> Any:
        start = {
            "type": "message_start",
            "message": {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 20, "output_tokens": 1},
            },
        }
        events = [start, {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}]
        events += [
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": f" word{i}"}}
            for i in range(self.words)
        ]
        for data in events:
            yield f"event: {data['type']}\ndata: {orjson.dumps(data).decode()}\n\n".encode()
        raise httpx.ReadError("the upstream connection broke")


async def test_a_native_stream_that_breaks_before_its_last_count_is_charged_what_it_relayed(tmp_path: Path) -> None:

    def broken(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=BrokenStream(40))

    async with running_app(settings_for(tmp_path, [CLAUDE]), httpx.MockTransport(broken)) as app:
        client = anthropic_client(app, await new_key(app))
        with pytest.raises(anthropic.APIError):  # the stream ends in an error event
            async with client.messages.stream(
                model="claude", max_tokens=500, messages=[{"role": "user", "content": "Say forty words."}]
            ) as stream:
                async for _ in stream:
                    pass
        (row,) = await ledger_rows(app)
    relayed = tokens("".join(f" word{i}" for i in range(40)))
    assert row["completion_tokens"] >= relayed
