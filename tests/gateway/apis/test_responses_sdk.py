"""The official openai SDK against the Responses translation: its own request building, its
response parsing, its stream accumulator and its error classes decide whether what costgate
produces is right."""

from __future__ import annotations

import json

import openai
import pytest
from pydantic import BaseModel

from tests.gateway.apis.chat_samples import Answer, Call
from tests.gateway.apis.responses_server import ResponsesServer

pytestmark = pytest.mark.slow  # boots processes: not in the fast lane

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather in a city",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
    "strict": True,
}
CALL = Call("call_w1", "get_weather", '{"city": "Paris"}')


async def test_text_answer_and_usage() -> None:
    server = ResponsesServer(
        Answer("Hello there!", prompt_tokens=20, completion_tokens=4, cached_tokens=8, reasoning_tokens=2)
    )
    response = await server.client().responses.create(
        model="small", input="hi", instructions="Be brief.", max_output_tokens=50, temperature=0.2
    )
    assert response.output_text == "Hello there!"
    assert response.status == "completed" and response.id.startswith("resp_")
    assert (response.usage.input_tokens, response.usage.output_tokens, response.usage.total_tokens) == (20, 4, 24)
    assert response.usage.input_tokens_details.cached_tokens == 8
    assert response.usage.output_tokens_details.reasoning_tokens == 2
    assert (response.instructions, response.max_output_tokens, response.temperature) == ("Be brief.", 50, 0.2)
    assert server.chat_bodies == [
        {
            "model": "small",
            "temperature": 0.2,
            "max_completion_tokens": 50,
            "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}],
        }
    ]


async def test_tool_round_trip_with_previous_response_id() -> None:
    server = ResponsesServer(Answer(None, (CALL,), "tool_calls"), Answer("It is sunny in Paris."))
    client = server.client()
    first = await client.responses.create(model="small", input="Weather in Paris?", tools=[WEATHER])
    call = first.output[0]
    assert call.type == "function_call" and call.call_id == "call_w1" and call.name == "get_weather"
    assert json.loads(call.arguments) == {"city": "Paris"}
    second = await client.responses.create(
        model="small",
        previous_response_id=first.id,
        tools=[WEATHER],
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": '{"sky": "sunny"}'}],
    )
    assert second.output_text == "It is sunny in Paris." and second.previous_response_id == first.id
    assert server.chat_bodies[1]["messages"] == [
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_w1", "type": "function", "function": {"name": "get_weather", "arguments": CALL.arguments}}
            ],
        },
        {"role": "tool", "tool_call_id": "call_w1", "content": '{"sky": "sunny"}'},
    ]
    assert server.chat_bodies[1]["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather in a city",
                "parameters": WEATHER["parameters"],
                "strict": True,
            },
        }
    ]


async def test_stream_text_through_the_sdk_accumulator() -> None:
    server = ResponsesServer(Answer("Streaming works fine.", prompt_tokens=9, completion_tokens=5))
    async with server.client().responses.stream(model="small", input="go") as stream:
        kinds = [event.type async for event in stream]
        final = await stream.get_final_response()
    assert final.output_text == "Streaming works fine." and final.usage.total_tokens == 14
    assert kinds[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert kinds[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert kinds.count("response.output_text.delta") == 7
    assert server.chat_bodies[0]["stream"] is True
    assert server.chat_bodies[0]["stream_options"] == {"include_usage": True}


async def test_stream_text_then_two_tool_calls() -> None:
    calls = (CALL, Call("call_w2", "get_weather", '{"city": "Oslo"}'))
    server = ResponsesServer(Answer("Checking both.", calls, "tool_calls"))
    async with server.client().responses.stream(model="small", input="Paris and Oslo?", tools=[WEATHER]) as stream:
        done = [e async for e in stream if e.type == "response.function_call_arguments.done"]
        final = await stream.get_final_response()
    assert [item.type for item in final.output] == ["message", "function_call", "function_call"]
    assert final.output_text == "Checking both."
    assert [(c.call_id, json.loads(c.arguments)["city"]) for c in final.output[1:]] == [
        ("call_w1", "Paris"),
        ("call_w2", "Oslo"),
    ]
    assert [e.arguments for e in done] == [c.arguments for c in calls]


async def test_structured_output_parsed_by_the_sdk() -> None:
    class City(BaseModel):
        name: str
        population: int

    server = ResponsesServer(Answer('{"name": "Oslo", "population": 709000}'))
    parsed = await server.client().responses.parse(model="small", input="Oslo?", text_format=City)
    assert parsed.output_parsed == City(name="Oslo", population=709000)
    fmt = server.chat_bodies[0]["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == "City"
    assert fmt["json_schema"]["strict"] is True and fmt["json_schema"]["schema"]["required"] == ["name", "population"]


async def test_stored_responses_are_per_team() -> None:
    server = ResponsesServer(Answer("kept"), Answer("not kept"))
    mine, theirs = server.client("team-a"), server.client("team-b")
    kept = await mine.responses.create(model="small", input="a")
    assert (await mine.responses.retrieve(kept.id)).output_text == "kept"
    with pytest.raises(openai.NotFoundError):
        await theirs.responses.retrieve(kept.id)
    with pytest.raises(openai.NotFoundError) as err:
        await theirs.responses.create(model="small", input="b", previous_response_id=kept.id)
    assert err.value.body["param"] == "previous_response_id"
    unstored = await mine.responses.create(model="small", input="c", store=False)
    with pytest.raises(openai.NotFoundError):
        await mine.responses.retrieve(unstored.id)
    await mine.responses.delete(kept.id)
    with pytest.raises(openai.NotFoundError):
        await mine.responses.retrieve(kept.id)


async def test_codex_defaults_are_dropped_not_refused() -> None:
    """What Codex sends by default (issue 29) reaches a chat upstream without a 400."""
    server = ResponsesServer(Answer("ok"))
    await server.client().responses.create(
        model="small",
        input=[
            {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"},
            *[{"role": "user", "content": "x"}],
        ],
        tools=[{"type": "web_search"}, {"type": "custom", "name": "apply_patch", "description": "patch"}],
        include=["reasoning.encrypted_content"],
        reasoning={"effort": "low", "summary": "auto"},
        store=False,
        extra_body={"client_metadata": {"session_id": "s"}},
    )
    assert server.chat_bodies[0]["reasoning_effort"] == "low" and "tools" not in server.chat_bodies[0]
    assert server.chat_bodies[0]["messages"] == [{"role": "user", "content": "x"}]


@pytest.mark.parametrize(
    "extra, param",
    [
        ({"tools": [{"type": "mcp", "server_label": "m", "server_url": "https://mcp.example"}]}, "tools[0].type"),
        ({"background": True}, "background"),
        ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "input[0].type"),
    ],
)
async def test_untranslatable_requests_are_refused_with_the_sdk_error(extra: dict, param: str) -> None:
    server = ResponsesServer(Answer("never"))
    with pytest.raises(openai.BadRequestError) as err:
        await server.client().responses.create(**({"model": "small", "input": "x"} | extra))
    assert err.value.body["param"] == param and err.value.body["type"] == "invalid_request_error"
    assert server.chat_bodies == []
