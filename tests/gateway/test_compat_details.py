"""Issue 14 items 3-5 through a running gateway, with the official SDKs as clients:
`GET /v1/models/{id}` (and the Models API in Anthropic's shape for Anthropic's SDK);
parameters a provider lacks (n, seed, logprobs to Claude) dropped per model config and named,
never litellm's "set litellm.drop_params" advice; usage details (cached and reasoning tokens)
kept in chat, Responses and Messages answers, whole and streamed, and priced at their own
rates in the ledger; a stream request answered with JSON is a 502 through litellm as through
the openai provider."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from decimal import Decimal

import anthropic
import httpx
import openai
import pytest

from gateway.providers.litellm import WHOLE_ANSWER_TYPES, _media_type
from tests.fakes.fake_openai import REASONING
from tests.support import FakeUpstream, GatewayProcess, model

pytestmark = pytest.mark.slow  # boots processes: not in the fast lane

MILLION = Decimal(10**6)
IN, CACHED, OUT, REASONED = Decimal(1) / MILLION, Decimal("0.25") / MILLION, Decimal(4) / MILLION, Decimal(8) / MILLION
DETAILS_PRICE = {
    "input_per_mtok": "1",
    "output_per_mtok": "4",
    "cached_input_per_mtok": "0.25",
    "reasoning_output_per_mtok": "8",
}
LACKS = ["n", "seed", "logprobs", "top_logprobs"]  # what litellm's Anthropic provider refuses


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream) -> Iterator[GatewayProcess]:
    root = fake_upstream.url.removesuffix("/v1")
    claude = {"provider": "litellm", "model": "anthropic/claude-haiku-4-5", "api_base": root, "api_key": "fake-key"}
    litellm_json = {"provider": "litellm", "api_key": "fake-key", "price": {"input_per_mtok": 1, "output_per_mtok": 1}}
    models = [
        model("details", "echo-details", fake_upstream.url) | {"price": DETAILS_PRICE},
        model("small", "echo-small", fake_upstream.url, "0.15", "0.6"),
        {"name": "claude", **claude},
        {"name": "claude-lenient", **claude, "drop_params": LACKS},
        {"name": "json-openai", **litellm_json, "model": "openai/json-stream", "api_base": fake_upstream.url},
        {"name": "json-anthropic", **litellm_json, "model": "anthropic/json-stream", "api_base": root},
        model("json-direct", "json-stream", fake_upstream.url),
    ]
    gateway = GatewayProcess({"models": models}, tmp_path_factory.mktemp("compat"))
    yield gateway
    gateway.stop()


@pytest.fixture(scope="module")
def key(gw: GatewayProcess) -> str:
    return gw.new_key("team-compat")


def traced() -> dict[str, str]:
    return {"x-costgate-trace-id": "t-" + secrets.token_hex(6)}


def ledger_cost(gw: GatewayProcess, headers: dict[str, str]) -> Decimal:
    response = gw.admin("GET", f"/admin/traces/{headers['x-costgate-trace-id']}")
    assert response.status_code == 200, response.text
    [row] = response.json()["calls"]
    return Decimal(row["cost_usd"])


# GET /v1/models/{id}


def test_a_model_is_retrieved_in_openais_shape(gw: GatewayProcess, key: str) -> None:
    found = gw.client(key).models.retrieve("claude")
    assert (found.id, found.object, found.owned_by) == ("claude", "model", "costgate")
    with pytest.raises(openai.NotFoundError) as err:
        gw.client(key).models.retrieve("no-such-model")
    assert err.value.body == {
        "message": "The model 'no-such-model' does not exist",
        "type": "invalid_request_error",
        "param": "model",
        "code": "model_not_found",
    }


def test_a_key_sees_only_the_models_it_may_use(gw: GatewayProcess) -> None:
    client = gw.client(gw.new_key("team-compat", models=["small"]))
    assert client.models.retrieve("small").id == "small"
    with pytest.raises(openai.NotFoundError):  # as unknown as a model that does not exist
        client.models.retrieve("claude")
    anonymous = httpx.get(gw.url + "/v1/models/small")
    assert anonymous.status_code == 401 and anonymous.json()["error"]["type"] == "authentication_error"


def test_anthropic_clients_list_and_retrieve_models_in_anthropics_shape(gw: GatewayProcess, key: str) -> None:
    client = anthropic.Anthropic(api_key=key, base_url=gw.url, max_retries=0)
    names = [m.id for m in client.models.list()]  # the SDK sends anthropic-version
    assert names == [m.id for m in gw.client(key).models.list()] and "claude" in names
    paged = client.models.list(limit=2)  # auto-pagination walks after_id to the end
    assert [m.id for m in paged] == names and len(paged.data) == 2 and paged.has_more
    assert [m.id for m in client.models.list(limit=2, after_id=names[1])] == names[2:]
    assert [m.id for m in client.models.list(limit=1, before_id=names[2]).data] == [names[1]]
    found = client.models.retrieve("claude")
    assert (found.id, found.type, found.display_name, found.lifecycle) == ("claude", "model", "claude", "active")
    with pytest.raises(anthropic.NotFoundError) as err:
        client.models.retrieve("no-such-model")
    assert err.value.body == {
        "type": "error",
        "error": {"type": "not_found_error", "message": "The model 'no-such-model' does not exist"},
    }
    with pytest.raises(anthropic.BadRequestError):
        client.models.list(limit=0)
    narrow = anthropic.Anthropic(api_key=gw.new_key("team-compat", models=["small"]), base_url=gw.url, max_retries=0)
    assert [m.id for m in narrow.models.list()] == ["small"]
    with pytest.raises(anthropic.NotFoundError):
        narrow.models.retrieve("claude")
    with pytest.raises(anthropic.AuthenticationError):
        anthropic.Anthropic(api_key="sk-wrong", base_url=gw.url, max_retries=0).models.list()


# Parameters a provider lacks


def test_what_claude_lacks_is_dropped_per_model_and_named(gw: GatewayProcess, key: str) -> None:
    raw = gw.client(key).chat.completions.with_raw_response.create(
        model="claude-lenient",
        messages=[{"role": "user", "content": "hello claude"}],
        n=1,
        seed=7,
        logprobs=True,
        top_logprobs=2,
    )
    assert raw.parse().choices[0].message.content == "echo: hello claude"
    assert raw.headers["x-costgate-dropped-params"] == "logprobs,n,seed,top_logprobs"


@pytest.mark.parametrize("field", [{"n": 2}, {"seed": 7}, {"logprobs": True}])
def test_without_drop_params_the_refusal_names_costgates_setting(gw: GatewayProcess, key: str, field: dict) -> None:
    with pytest.raises(openai.BadRequestError) as err:
        gw.client(key).chat.completions.create(
            model="claude", messages=[{"role": "user", "content": "hello claude"}], **field
        )
    message = err.value.body["message"]
    assert err.value.body["code"] == "unsupported_parameter"
    assert f"model 'claude' does not take {next(iter(field))}" in message and "`drop_params`" in message
    for litellms_advice in ("litellm", "allowed_openai_params", "drop_params=True"):
        assert litellms_advice not in message


# Usage details


def chat_cost(usage: openai.types.CompletionUsage) -> Decimal:
    cached = usage.prompt_tokens_details.cached_tokens
    reasoning = usage.completion_tokens_details.reasoning_tokens
    return (
        (usage.prompt_tokens - cached) * IN
        + cached * CACHED
        + (usage.completion_tokens - reasoning) * OUT
        + reasoning * REASONED
    )


def test_chat_keeps_the_details_and_prices_them(gw: GatewayProcess, key: str) -> None:
    headers = traced()
    question = [{"role": "user", "content": f"a question of some length {secrets.token_hex(4)}"}]
    raw = gw.client(key).chat.completions.with_raw_response.create(
        model="details", messages=question, extra_headers=headers
    )
    usage = raw.parse().usage
    assert usage.prompt_tokens_details.cached_tokens == usage.prompt_tokens // 2 > 0
    assert usage.completion_tokens_details.reasoning_tokens == REASONING
    assert Decimal(raw.headers["x-costgate-cost-usd"]) == chat_cost(usage) == ledger_cost(gw, headers)


def test_a_chat_stream_keeps_the_details_and_prices_them(gw: GatewayProcess, key: str) -> None:
    headers = traced()
    chunks = list(
        gw.client(key).chat.completions.create(
            model="details",
            messages=[{"role": "user", "content": f"stream a question of some length {secrets.token_hex(4)}"}],
            stream=True,
            stream_options={"include_usage": True},
            extra_headers=headers,
        )
    )
    usage = chunks[-1].usage
    assert usage.prompt_tokens_details.cached_tokens == usage.prompt_tokens // 2 > 0
    assert usage.completion_tokens_details.reasoning_tokens == REASONING
    # the upstream's other details are kept
    assert usage.prompt_tokens_details.audio_tokens == 0
    assert usage.completion_tokens_details.accepted_prediction_tokens == 0
    assert Decimal(usage.model_extra["cost_usd"]) == chat_cost(usage) == ledger_cost(gw, headers)


@pytest.mark.parametrize("stream", [False, True])
def test_responses_keep_the_details(gw: GatewayProcess, key: str, stream: bool) -> None:
    headers = traced()
    question = f"a responses question of some length {secrets.token_hex(4)}"
    client = gw.client(key)
    if stream:
        with client.responses.stream(model="details", input=question, extra_headers=headers) as events:
            usage = events.get_final_response().usage
    else:
        usage = client.responses.create(model="details", input=question, extra_headers=headers).usage
    assert usage is not None
    cached, reasoning = usage.input_tokens_details.cached_tokens, usage.output_tokens_details.reasoning_tokens
    assert cached == usage.input_tokens // 2 > 0 and reasoning == REASONING
    expected = (usage.input_tokens - cached) * IN + cached * CACHED + (usage.output_tokens - reasoning) * OUT
    assert ledger_cost(gw, headers) == expected + reasoning * REASONED


@pytest.mark.parametrize("stream", [False, True])
def test_messages_report_cache_reads_apart(gw: GatewayProcess, key: str, stream: bool) -> None:
    headers = traced()
    client = anthropic.Anthropic(base_url=gw.url, api_key=key, max_retries=0)
    fields = {
        "model": "details",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": f"a messages question of some length {secrets.token_hex(4)}"}],
        "extra_headers": headers,
    }
    if stream:
        with client.messages.stream(**fields) as events:
            usage = events.get_final_message().usage
    else:
        usage = client.messages.create(**fields).usage
    cached = usage.cache_read_input_tokens or 0
    assert cached > 0 and cached == (usage.input_tokens + cached) // 2
    # Anthropic's usage has no reasoning count: its output tokens include them, priced at their rate
    expected = usage.input_tokens * IN + cached * CACHED + (usage.output_tokens - REASONING) * OUT
    assert ledger_cost(gw, headers) == expected + REASONING * REASONED


# A stream answered with JSON


@pytest.mark.parametrize("name", ["json-openai", "json-anthropic", "json-direct"])
def test_a_stream_answered_with_json_is_a_bad_gateway(gw: GatewayProcess, key: str, name: str) -> None:
    with pytest.raises(openai.APIStatusError) as err:
        list(
            gw.client(key).chat.completions.create(
                model=name, messages=[{"role": "user", "content": "stream please"}], stream=True
            )
        )
    assert err.value.status_code == 502
    assert err.value.body["code"] == "bad_upstream_body"
    assert "without server-sent events" in err.value.body["message"]


@pytest.mark.parametrize(
    "content_type, whole",
    [
        ("application/json", True),
        ("application/json; charset=utf-8", True),
        ("text/html; charset=utf-8", True),
        ("text/event-stream; charset=utf-8", False),
        ("application/vnd.amazon.eventstream", False),  # Bedrock streams in its own type
        ("application/x-ndjson", False),
        ("application/jsonl", False),
        (None, False),  # litellm kept no content type: nothing to judge by
    ],
)
def test_which_answers_to_a_stream_request_are_whole(content_type: str | None, whole: bool) -> None:
    class Wrapper:  # litellm's CustomStreamWrapper keeps the upstream's headers here
        _hidden_params = {"additional_headers": {"llm_provider-content-type": content_type}}

    assert (_media_type(Wrapper()) in WHOLE_ANSWER_TYPES) is whole
