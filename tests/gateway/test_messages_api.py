"""Anthropic's Messages API through a running gateway, with the official anthropic SDK as the
client: whole and streamed, with tools, priced, in the ledger, budget-checked (402 as a
billing_error) and cacheable, through an upstream that speaks only Chat Completions (`small`)
and through one that serves the Messages API itself (`native`, tests/fakes/fake_native.py)."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from decimal import Decimal

import anthropic
import httpx
import pytest

from tests.support import FakeUpstream, GatewayProcess, model

pytestmark = pytest.mark.slow  # boots processes: not in the fast lane

PRICE_IN, PRICE_OUT = Decimal("0.15") / 10**6, Decimal("0.6") / 10**6
MODELS = ["small", "native"]
WEATHER = {
    "name": "get_weather",
    "description": "Weather in a city",
    "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
}


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream) -> Iterator[GatewayProcess]:
    models = [
        model("small", "echo-small", fake_upstream.url, "0.15", "0.6"),
        model("native", "echo-native", fake_upstream.url, "0.15", "0.6", apis=["chat", "messages"]),
    ]
    gateway = GatewayProcess({"models": models}, tmp_path_factory.mktemp("messages"))
    yield gateway
    gateway.stop()


def client_for(gw: GatewayProcess, key: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=gw.url, api_key=key, max_retries=0)


@pytest.fixture(scope="module")
def client(gw: GatewayProcess) -> anthropic.Anthropic:
    return client_for(gw, gw.new_key("team-m"))


def cost(usage: anthropic.types.Usage) -> Decimal:
    prompt = usage.input_tokens + (usage.cache_read_input_tokens or 0)
    return prompt * PRICE_IN + usage.output_tokens * PRICE_OUT


def traced() -> dict[str, dict[str, str]]:
    return {"extra_headers": {"x-costgate-trace-id": "t-" + secrets.token_hex(6)}}


def ledger(gw: GatewayProcess, headers: dict[str, dict[str, str]]) -> list[dict]:
    response = gw.admin("GET", f"/admin/traces/{headers['extra_headers']['x-costgate-trace-id']}")
    assert response.status_code == 200, response.text
    return response.json()["calls"]


def native_calls(fake: FakeUpstream) -> int:
    return fake.stats().get("messages:echo-native", 0)


def ask(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


@pytest.mark.parametrize("name", MODELS)
def test_whole_message_is_priced_and_in_the_ledger(
    gw: GatewayProcess, client: anthropic.Anthropic, fake_upstream: FakeUpstream, name: str
) -> None:
    before, headers = native_calls(fake_upstream), traced()
    raw = client.messages.with_raw_response.create(
        model=name, max_tokens=100, system="Be brief.", messages=ask(f"hello claude {name}"), **headers
    )
    message = raw.parse()
    assert [(b.type, b.text) for b in message.content] == [("text", f"echo: hello claude {name}")]
    # the name the client asked for, a native answer's too (the upstream's is in x-costgate-model's deployment)
    assert (message.role, message.stop_reason, message.model) == ("assistant", "end_turn", name)
    assert raw.headers["x-costgate-model"] == name and raw.headers["x-costgate-cache"] == "miss"
    charged = Decimal(raw.headers["x-costgate-cost-usd"])
    assert charged == cost(message.usage) > 0
    [row] = ledger(gw, headers)
    assert (Decimal(row["cost_usd"]), row["status"], row["model"]) == (charged, 200, name)
    assert native_calls(fake_upstream) - before == (name == "native")


@pytest.mark.parametrize("name", MODELS)
def test_stream_reports_its_cost_in_the_final_usage(gw: GatewayProcess, client: anthropic.Anthropic, name: str) -> None:
    headers = traced()
    with client.messages.stream(model=name, max_tokens=100, messages=ask(f"stream it {name}"), **headers) as stream:
        events = list(stream)
        final = stream.get_final_message()
    assert final.content[0].text == f"echo: stream it {name}"
    assert events[0].type == "message_start" and events[-1].type == "message_stop"
    [delta] = [e for e in events if e.type == "message_delta"]
    charged = Decimal(delta.usage.model_extra["cost_usd"])  # the SDK's accumulator keeps Anthropic's fields only
    assert charged == cost(final.usage) > 0
    [row] = ledger(gw, headers)
    assert Decimal(row["cost_usd"]) == charged and row["status"] == 200


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("stream", [False, True])
def test_tool_use_round_trip(client: anthropic.Anthropic, name: str, stream: bool) -> None:
    def create(**fields: object) -> anthropic.types.Message:
        if not stream:
            return client.messages.create(model=name, max_tokens=200, tools=[WEATHER], **fields)
        with client.messages.stream(model=name, max_tokens=200, tools=[WEATHER], **fields) as events:
            return events.get_final_message()

    question = ask("Weather in Paris?")
    first = create(messages=question, tool_choice={"type": "any"})
    assert first.stop_reason == "tool_use"
    [use] = first.content
    assert (use.type, use.name, use.input) == ("tool_use", "get_weather", {"q": "Weather in Paris?"})
    second = create(
        messages=[
            *question,
            {"role": "assistant", "content": first.content},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "sunny"}]},
        ]
    )
    assert second.content[0].text == "echo: tool said sunny" and second.stop_reason == "end_turn"


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("stream", [False, True])
def test_a_repeat_is_a_cache_hit_at_no_cost(client: anthropic.Anthropic, name: str, stream: bool) -> None:
    question = ask(f"cache me {name} {stream} {secrets.token_hex(4)}")

    def once() -> tuple[str, str, Decimal]:
        if not stream:
            raw = client.messages.with_raw_response.create(model=name, max_tokens=100, messages=question)
            text = raw.parse().content[0].text
            return text, raw.headers["x-costgate-cache"], Decimal(raw.headers["x-costgate-cost-usd"])
        with client.messages.with_streaming_response.create(
            model=name, max_tokens=100, messages=question, stream=True
        ) as raw:
            events = [json.loads(line[5:]) for line in raw.iter_lines() if line.startswith("data:")]
            text = "".join(e["delta"].get("text", "") for e in events if e["type"] == "content_block_delta")
            [delta] = [e for e in events if e["type"] == "message_delta"]
            return text, raw.headers["x-costgate-cache"], Decimal(delta["usage"]["cost_usd"])

    first, second = once(), once()
    assert first[0] == second[0] == f"echo: {question[0]['content']}"
    assert (first[1], second[1]) == ("miss", "exact")
    assert first[2] > 0 and second[2] == 0


@pytest.mark.parametrize("name", MODELS)
def test_a_budget_too_small_is_a_billing_error(gw: GatewayProcess, fake_upstream: FakeUpstream, name: str) -> None:
    key = gw.key_with_budget(f"poor-m-{name}", "0.000001")
    calls = sum(fake_upstream.stats().values())
    with pytest.raises(anthropic.PaymentRequiredError) as refused:
        client_for(gw, key).messages.create(model=name, max_tokens=1000, messages=ask("an expensive question"))
    error = refused.value.body["error"]
    assert error["type"] == "billing_error"
    assert "spent $0" in error["message"] and "limit $0.000001" in error["message"]
    assert refused.value.response.headers["request-id"].startswith("req_")
    assert sum(fake_upstream.stats().values()) == calls


def test_refusals_are_in_anthropics_shape(gw: GatewayProcess, client: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.BadRequestError) as refused:
        document = {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "x"}}
        client.messages.create(model="small", max_tokens=10, messages=[{"role": "user", "content": [document]}])
    assert refused.value.body["error"]["type"] == "invalid_request_error"
    with pytest.raises(anthropic.NotFoundError):
        client.messages.create(model="no-such-model", max_tokens=10, messages=ask("hi"))
    with pytest.raises(anthropic.AuthenticationError):
        client_for(gw, "sk-cg-wrong").messages.create(model="small", max_tokens=10, messages=ask("hi"))
    response = httpx.post(
        gw.url + "/v1/messages",
        headers={"x-api-key": "sk-cg-wrong"},
        json={"model": "small", "max_tokens": 10, "messages": ask("hi")},
    )
    assert response.status_code == 401 and response.json()["error"]["type"] == "authentication_error"


def test_count_tokens(gw: GatewayProcess, client: anthropic.Anthropic) -> None:
    short = client.messages.count_tokens(model="small", messages=ask("hi"))
    longer = client.messages.count_tokens(model="small", messages=ask("hi " * 50), tools=[WEATHER])
    assert 0 < short.input_tokens < longer.input_tokens
    with pytest.raises(anthropic.NotFoundError):
        client.messages.count_tokens(model="no-such-model", messages=ask("hi"))
