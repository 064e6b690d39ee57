"""The official anthropic SDK against the Messages translation: its request building, Message
parsing, stream accumulator (get_final_message) and error classes decide whether what
costgate produces is right."""

from __future__ import annotations

import anthropic
import pytest

from tests.gateway.apis.chat_samples import Answer, Call
from tests.gateway.apis.messages_server import MessagesServer

pytestmark = pytest.mark.slow  # boots processes: not in the fast lane

WEATHER = {
    "name": "get_weather",
    "description": "Weather in a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
HI = [{"role": "user", "content": "Hello, Claude"}]


async def test_text_message_and_usage() -> None:
    server = MessagesServer(Answer("Hi! How can I help?", prompt_tokens=30, completion_tokens=6, cached_tokens=20))
    message = await server.client().messages.create(
        model="small",
        max_tokens=100,
        messages=HI,
        system="You are terse.",
        metadata={"user_id": "u-42"},
        stop_sequences=["END"],
    )
    assert [(b.type, b.text) for b in message.content] == [("text", "Hi! How can I help?")]
    assert (message.role, message.stop_reason, message.stop_sequence, message.model) == (
        "assistant",
        "end_turn",
        None,
        "small",
    )
    assert (message.usage.input_tokens, message.usage.cache_read_input_tokens, message.usage.output_tokens) == (
        10,
        20,
        6,
    )
    assert server.chat_bodies == [
        {
            "model": "small",
            "max_completion_tokens": 100,
            "user": "u-42",
            "stop": ["END"],
            "messages": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hello, Claude"}],
        }
    ]
    assert server.keys == ["sk-cg-test"]


async def test_tool_use_round_trip() -> None:
    server = MessagesServer(
        Answer("Let me check.", (Call("call_7", "get_weather", '{"city": "Paris"}'),), "tool_calls"),
        Answer("Sunny, 24 C."),
    )
    client = server.client()
    ask = {"role": "user", "content": "Weather in Paris?"}
    first = await client.messages.create(
        model="small",
        max_tokens=200,
        tools=[WEATHER],
        messages=[ask],
        tool_choice={"type": "any", "disable_parallel_tool_use": True},
    )
    assert first.stop_reason == "tool_use"
    use = first.content[1]
    assert (use.type, use.id, use.name, use.input) == ("tool_use", "call_7", "get_weather", {"city": "Paris"})
    second = await client.messages.create(
        model="small",
        max_tokens=200,
        tools=[WEATHER],
        messages=[
            ask,
            {"role": "assistant", "content": first.content},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": use.id, "content": "sunny, 24 C"},
                    {"type": "text", "text": "And in Celsius?"},
                ],
            },
        ],
    )
    assert second.content[0].text == "Sunny, 24 C."
    assert server.chat_bodies[0]["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "parameters": WEATHER["input_schema"],
                "description": "Weather in a city",
            },
        }
    ]
    assert (server.chat_bodies[0]["tool_choice"], server.chat_bodies[0]["parallel_tool_calls"]) == ("required", False)
    assert server.chat_bodies[1]["messages"][1:] == [
        {
            "role": "assistant",
            "content": "Let me check.",
            "tool_calls": [
                {
                    "id": "call_7",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_7", "content": "sunny, 24 C"},
        {"role": "user", "content": "And in Celsius?"},
    ]


async def test_stream_through_the_sdk_accumulator() -> None:
    server = MessagesServer(Answer("Streaming from a chat upstream.", prompt_tokens=15, completion_tokens=8))
    async with server.client().messages.stream(model="small", max_tokens=64, messages=HI) as stream:
        kinds = [event.type async for event in stream]
        final = await stream.get_final_message()
    assert [b.text for b in final.content] == ["Streaming from a chat upstream."]
    assert (final.stop_reason, final.usage.input_tokens, final.usage.output_tokens) == ("end_turn", 15, 8)
    assert kinds[:2] == ["message_start", "content_block_start"] and kinds[-3:] == [
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert server.chat_bodies[0]["stream_options"] == {"include_usage": True}


async def test_stream_text_then_tool_calls() -> None:
    calls = (Call("call_1", "get_weather", '{"city": "Paris"}'), Call("call_2", "get_weather", '{"city": "Oslo"}'))
    server = MessagesServer(Answer("Both:", calls, "tool_calls"))
    async with server.client().messages.stream(model="small", max_tokens=64, messages=HI, tools=[WEATHER]) as stream:
        final = await stream.get_final_message()
    assert [b.type for b in final.content] == ["text", "tool_use", "tool_use"]
    assert [(b.id, b.input) for b in final.content[1:]] == [("call_1", {"city": "Paris"}), ("call_2", {"city": "Oslo"})]
    assert final.stop_reason == "tool_use"


async def test_stop_sequence_named_by_a_vllm_upstream() -> None:
    server = MessagesServer(Answer("1, 2, 3", extra_choice={"stop_reason": "STOP"}))
    message = await server.client().messages.create(
        model="small", max_tokens=20, messages=HI, stop_sequences=["STOP", "END"]
    )
    assert (message.stop_reason, message.stop_sequence) == ("stop_sequence", "STOP")


async def test_count_tokens() -> None:
    server = MessagesServer()
    counted = await server.client().messages.count_tokens(model="small", system="Be brief.", messages=HI)
    more = await server.client().messages.count_tokens(
        model="small",
        system="Be brief.",
        messages=HI + [{"role": "assistant", "content": "Hi."}, {"role": "user", "content": "Tell me more."}],
    )
    assert 0 < counted.input_tokens < more.input_tokens


@pytest.mark.parametrize(
    "extra, param",
    [
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "x"}}
                        ],
                    }
                ]
            },
            "messages[0].content[0].type",
        ),
    ],
)
async def test_untranslatable_requests_are_refused(extra: dict, param: str) -> None:
    server = MessagesServer()
    with pytest.raises(anthropic.BadRequestError) as err:
        await server.client().messages.create(**({"model": "small", "max_tokens": 10, "messages": HI} | extra))
    assert err.value.body["error"]["type"] == "invalid_request_error" and param in err.value.body["error"]["message"]
    assert server.chat_bodies == []


async def test_thinking_and_server_tools_are_mapped_or_dropped_not_refused() -> None:
    """Claude Code's defaults (issue 29): thinking maps to the reasoning setting, a tool only
    Anthropic runs is left out."""
    server = MessagesServer(Answer("ok"))
    await server.client().messages.create(
        model="small",
        max_tokens=10,
        messages=HI,
        thinking={"type": "enabled", "budget_tokens": 2048},
        tools=[{"type": "web_search_20250305", "name": "web_search"}],
    )
    assert server.chat_bodies[0]["reasoning_effort"] == "low" and "tools" not in server.chat_bodies[0]


async def test_sampling_parameters_follow_the_api_version() -> None:
    """2023-06-01 has temperature, top_p and top_k; 2026-10-21 (this SDK's default) removed them."""
    server = MessagesServer(Answer("ok"))
    sampling = {"temperature": 0.3, "top_p": 0.9, "top_k": 40}
    old = server.client(default_headers={"anthropic-version": "2023-06-01"})
    await old.messages.create(model="small", max_tokens=5, messages=HI, extra_body=sampling)
    assert {k: server.chat_bodies[0][k] for k in sampling} == sampling
    with pytest.raises(anthropic.BadRequestError) as err:
        await server.client().messages.create(model="small", max_tokens=5, messages=HI, extra_body={"top_k": 5})
    assert err.value.body["error"]["message"].startswith("top_k: Extra inputs are not permitted")


async def test_keys_and_versions() -> None:
    server = MessagesServer(Answer("ok"), Answer("ok"))
    await server.client().messages.create(model="small", max_tokens=5, messages=HI)  # SDK 2.x: a bearer token
    x_api_key = server.client(default_headers={"x-api-key": "sk-cg-header"})
    await x_api_key.messages.create(model="small", max_tokens=5, messages=HI)  # both sent: x-api-key wins
    assert server.keys == ["sk-cg-test", "sk-cg-header"]
    with pytest.raises(anthropic.BadRequestError) as err:
        await server.client(default_headers={"anthropic-version": "2099-01-01"}).messages.create(
            model="small", max_tokens=5, messages=HI
        )
    assert "anthropic-version" in err.value.body["error"]["message"]
    with pytest.raises(anthropic.AuthenticationError) as auth:
        await server.client(default_headers={"authorization": "Basic eDp5"}).messages.create(
            model="small", max_tokens=5, messages=HI
        )
    assert auth.value.body["error"]["type"] == "authentication_error"
