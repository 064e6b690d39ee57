"""OpenAI's Responses API through a running gateway, with the official openai SDK as the client:
whole and streamed, with tools and previous_response_id, priced, in the ledger, budget-checked
and cacheable, through an upstream that speaks only Chat Completions (`small`) and through one
that serves the Responses API itself (`native`, tests/fakes/fake_native.py)."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from decimal import Decimal

import httpx
import openai
import pytest

from tests.support import FakeUpstream, GatewayProcess, model

pytestmark = pytest.mark.slow  # boots processes: not in the fast lane

PRICE_IN, PRICE_OUT = Decimal("0.15") / 10**6, Decimal("0.6") / 10**6
MODELS = ["small", "native"]
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather in a city",
    "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
}


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream) -> Iterator[GatewayProcess]:
    models = [
        model("small", "echo-small", fake_upstream.url, "0.15", "0.6"),
        model("native", "echo-native", fake_upstream.url, "0.15", "0.6", apis=["chat", "responses"]),
    ]
    gateway = GatewayProcess({"models": models}, tmp_path_factory.mktemp("responses"))
    yield gateway
    gateway.stop()


@pytest.fixture(scope="module")
def client(gw: GatewayProcess) -> openai.OpenAI:
    return gw.client(gw.new_key("team-r"))


def cost(usage: openai.types.responses.ResponseUsage) -> Decimal:
    return usage.input_tokens * PRICE_IN + usage.output_tokens * PRICE_OUT


def ledger(gw: GatewayProcess, trace: str) -> list[dict]:
    response = gw.admin("GET", f"/admin/traces/{trace}")
    assert response.status_code == 200, response.text
    return response.json()["calls"]


def traced() -> dict[str, dict[str, str]]:
    return {"extra_headers": {"x-costgate-trace-id": "t-" + secrets.token_hex(6)}}


def native_calls(fake: FakeUpstream) -> int:
    return fake.stats().get("responses:echo-native", 0)


@pytest.mark.parametrize("name", MODELS)
def test_whole_answer_is_priced_and_in_the_ledger(
    gw: GatewayProcess, client: openai.OpenAI, fake_upstream: FakeUpstream, name: str
) -> None:
    before, headers = native_calls(fake_upstream), traced()
    raw = client.responses.with_raw_response.create(
        model=name, input=f"what is two plus two {name}", instructions="Be brief.", **headers
    )
    response = raw.parse()
    assert response.output_text == f"echo: what is two plus two {name}"
    assert response.status == "completed" and response.id.startswith("resp_")
    assert raw.headers["x-costgate-model"] == name and raw.headers["x-costgate-cache"] == "miss"
    charged = Decimal(raw.headers["x-costgate-cost-usd"])
    assert charged == cost(response.usage) > 0
    [row] = ledger(gw, headers["extra_headers"]["x-costgate-trace-id"])
    assert (Decimal(row["cost_usd"]), row["status"], row["model"]) == (charged, 200, name)
    assert native_calls(fake_upstream) - before == (name == "native")


@pytest.mark.parametrize("name", MODELS)
def test_stream_reports_its_cost_in_the_final_usage(gw: GatewayProcess, client: openai.OpenAI, name: str) -> None:
    headers = traced()
    with client.responses.stream(model=name, input=f"count to three {name}", **headers) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert final.output_text == f"echo: count to three {name}"
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    charged = Decimal(final.usage.model_extra["cost_usd"])
    assert charged == cost(final.usage) > 0
    [row] = ledger(gw, headers["extra_headers"]["x-costgate-trace-id"])
    assert Decimal(row["cost_usd"]) == charged and row["status"] == 200


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("stream", [False, True])
def test_tool_round_trip_with_previous_response_id(client: openai.OpenAI, name: str, stream: bool) -> None:
    def create(**fields: object) -> openai.types.responses.Response:
        if not stream:
            return client.responses.create(model=name, tools=[WEATHER], **fields)
        with client.responses.stream(model=name, tools=[WEATHER], **fields) as events:
            return events.get_final_response()

    first = create(input="Weather in Paris?", tool_choice="required")
    [call] = first.output
    assert call.type == "function_call" and call.name == "get_weather"
    assert json.loads(call.arguments) == {"q": "Weather in Paris?"}
    second = create(
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}],
    )
    assert second.output_text == "echo: tool said sunny"
    assert second.previous_response_id == first.id
    third = create(previous_response_id=second.id, input="And tomorrow?")
    assert third.output_text == "echo: And tomorrow?"


@pytest.mark.parametrize("name", MODELS)
def test_stored_responses_are_the_teams_own(gw: GatewayProcess, client: openai.OpenAI, name: str) -> None:
    created = client.responses.create(model=name, input="keep me")
    assert client.responses.retrieve(created.id).output_text == "echo: keep me"
    other = gw.client(gw.new_key("team-other"))
    with pytest.raises(openai.NotFoundError):
        other.responses.retrieve(created.id)
    with pytest.raises(openai.NotFoundError):
        other.responses.create(model=name, input="continue", previous_response_id=created.id)
    with pytest.raises(openai.NotFoundError):
        other.responses.delete(created.id)
    client.responses.delete(created.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(created.id)
    unstored = client.responses.create(model=name, input="forget me", store=False)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(unstored.id)


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("stream", [False, True])
def test_a_repeat_is_a_cache_hit_at_no_cost(client: openai.OpenAI, name: str, stream: bool) -> None:
    question = f"cache me {name} {stream} {secrets.token_hex(4)}"

    def ask() -> tuple[str, str, Decimal]:
        if not stream:
            raw = client.responses.with_raw_response.create(model=name, input=question)
            return raw.parse().output_text, raw.headers["x-costgate-cache"], Decimal(raw.headers["x-costgate-cost-usd"])
        with client.responses.with_streaming_response.create(model=name, input=question, stream=True) as raw:
            events = [json.loads(line[5:]) for line in raw.iter_lines() if line.startswith("data:")]
            final = events[-1]["response"]
            text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
            return text, raw.headers["x-costgate-cache"], Decimal(final["usage"]["cost_usd"])

    first, second = ask(), ask()
    assert first[0] == second[0] == f"echo: {question}"
    assert (first[1], second[1]) == ("miss", "exact")
    assert first[2] > 0 and second[2] == 0


@pytest.mark.parametrize("name", MODELS)
def test_a_budget_too_small_is_refused_before_any_upstream_call(
    gw: GatewayProcess, fake_upstream: FakeUpstream, name: str
) -> None:
    key = gw.key_with_budget(f"poor-{name}", "0.000001")
    calls = sum(fake_upstream.stats().values())
    with pytest.raises(openai.APIStatusError) as refused:
        gw.client(key).responses.create(model=name, input="an expensive question", max_output_tokens=1000)
    assert refused.value.status_code == 402
    message = refused.value.body["message"]
    assert "spent $0" in message and "limit $0.000001" in message and "needs up to its worst case $" in message
    assert sum(fake_upstream.stats().values()) == calls


def test_what_cannot_be_translated_is_refused_and_recorded(gw: GatewayProcess) -> None:
    client = gw.client(gw.new_key("team-refused"))
    with pytest.raises(openai.BadRequestError) as refused:
        mcp = {"type": "mcp", "server_label": "m", "server_url": "https://mcp.example"}
        client.responses.create(model="small", input="hi", tools=[mcp])
    assert refused.value.body["param"] == "tools[0].type"
    [team] = [t["id"] for t in gw.admin("GET", "/admin/teams").json()["data"] if t["name"] == "team-refused"]
    [row] = [r for r in gw.spend("team")["rows"] if r["group"] == team]
    assert (row["requests"], Decimal(row["cost_usd"])) == (1, 0)


def test_a_wrong_key_never_reaches_the_pipeline(gw: GatewayProcess) -> None:
    response = httpx.post(
        gw.url + "/v1/responses",
        json={"model": "small", "input": "hi"},
        headers={"authorization": "Bearer sk-cg-wrong"},
    )
    assert response.status_code == 401 and response.json()["error"]["code"] == "invalid_api_key"


@pytest.mark.parametrize("name", MODELS)
def test_what_is_priced_apart_is_dropped_and_named(client: openai.OpenAI, name: str) -> None:
    """service_tier buys what a token price does not cover: neither path sends it upstream."""
    raw = client.responses.with_raw_response.create(model=name, input="tier", service_tier="priority")
    assert raw.parse().output_text == "echo: tier"
    assert raw.headers["x-costgate-dropped-params"] == "service_tier"


def test_input_tokens_counts_a_responses_request(gw: GatewayProcess, client: openai.OpenAI) -> None:
    """POST /v1/responses/input_tokens (issue 28: it answered 405, matching GET /v1/responses/{id})."""

    def count(**body: object) -> int:
        counted = client.responses.input_tokens.count(**body)  # type: ignore[arg-type]
        assert counted.object == "response.input_tokens"
        return counted.input_tokens

    short = count(model="small", input="what is two plus two")
    assert 0 < short < count(model="small", input="what is two plus two " * 20)
    assert count(model="small", input="what is two plus two", instructions="Answer in one word.") > short
    assert count(model="small", input="what is two plus two", tools=[WEATHER]) > short
    first = client.responses.create(model="small", input="what is two plus two, with history")
    continued = count(model="small", input="and three?", previous_response_id=first.id)
    assert continued > count(model="small", input="and three?")  # the stored conversation counts too
    with pytest.raises(openai.NotFoundError):
        count(model="no-such-model", input="hi")
    limited = gw.client(gw.new_key("team-r-limited", models=["native"]))
    with pytest.raises(openai.PermissionDeniedError):
        limited.responses.input_tokens.count(model="small", input="hi")
    other = gw.client(gw.new_key("team-r-other"))
    with pytest.raises(openai.NotFoundError):  # another team's conversation does not exist for it
        other.responses.input_tokens.count(model="small", input="hi", previous_response_id=first.id)


def test_input_items_lists_a_stored_responses_input(gw: GatewayProcess, client: openai.OpenAI) -> None:
    said = ["first message", "second message", "third message"]
    response = client.responses.create(model="small", input=[{"role": "user", "content": s} for s in said])
    items = list(client.responses.input_items.list(response.id))
    assert [i.content[0].text for i in items] == said[::-1]  # newest first, as OpenAI lists them
    assert len({i.id for i in items}) == 3 and all(i.type == "message" and i.role == "user" for i in items)
    paged = list(client.responses.input_items.list(response.id, limit=1, order="asc"))  # the SDK pages by `after`
    assert [i.content[0].text for i in paged] == said and [i.id for i in paged] == [i.id for i in items][::-1]
    other = gw.client(gw.new_key("team-r-other"))
    with pytest.raises(openai.NotFoundError):
        other.responses.input_items.list(response.id)
    with pytest.raises(openai.BadRequestError):
        client.responses.input_items.list(response.id, limit=1000)
