"""Chat completions through a running gateway with the official openai SDK."""

from __future__ import annotations

from decimal import Decimal

import openai
import pytest

from tests.support import GatewayProcess

pytestmark = pytest.mark.slow  # boots processes: not in the fast lane

SMALL_IN, SMALL_OUT = Decimal("0.15") / 10**6, Decimal("0.6") / 10**6


def expected_cost(usage, price_in: Decimal = SMALL_IN, price_out: Decimal = SMALL_OUT) -> Decimal:
    return usage.prompt_tokens * price_in + usage.completion_tokens * price_out


def test_plain_chat_is_charged_exactly(gateway: GatewayProcess, key: str) -> None:
    raw = gateway.client(key).chat.completions.with_raw_response.create(
        model="small", messages=[{"role": "user", "content": "what is two plus two"}]
    )
    completion = raw.parse()
    assert completion.choices[0].message.content == "echo: what is two plus two"
    assert raw.headers["x-costgate-model"] == "small"
    assert raw.headers["x-costgate-cache"] == "miss"
    assert raw.headers["x-costgate-request-id"].startswith("req_")
    assert Decimal(raw.headers["x-costgate-cost-usd"]) == expected_cost(completion.usage)
    assert expected_cost(completion.usage) > 0


def test_streamed_chat_reports_cost_in_usage_chunk(gateway: GatewayProcess, key: str) -> None:
    stream = gateway.client(key).chat.completions.create(
        model="small",
        stream=True,
        stream_options={"include_usage": True},
        messages=[{"role": "user", "content": "count to three please"}],
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "echo: count to three please"
    usage = chunks[-1].usage
    assert usage is not None and not chunks[-1].choices
    assert Decimal(usage.model_extra["cost_usd"]) == expected_cost(usage)


def test_stream_without_usage_request_gets_no_usage_chunk(gateway: GatewayProcess, key: str) -> None:
    chunks = list(
        gateway.client(key).chat.completions.create(
            model="small", stream=True, messages=[{"role": "user", "content": "hello"}]
        )
    )
    assert chunks and all(c.choices for c in chunks)
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "echo: hello"
    assert all(c.usage is None for c in chunks)


def test_price_from_litellm_map(gateway: GatewayProcess, key: str) -> None:
    raw = gateway.client(key).chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}]
    )
    usage = raw.parse().usage
    assert Decimal(raw.headers["x-costgate-cost-usd"]) == expected_cost(usage)  # gpt-4o-mini: $0.15 / $0.60


def test_openai_fields_pass_and_unknown_ones_are_dropped_and_named(gateway: GatewayProcess, key: str) -> None:
    raw = gateway.client(key).chat.completions.with_raw_response.create(
        model="small",
        seed=7,
        messages=[{"role": "user", "content": "x"}],
        tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
        response_format={"type": "json_object"},
        logprobs=True,
        n=1,
        extra_body={"vendor_field": 1, "top_k": 3, "service_tier": "priority"},
    )
    assert raw.parse().system_fingerprint == "seed-7"  # the fake saw the seed
    assert raw.headers["x-costgate-dropped-params"] == "service_tier,top_k,vendor_field"


def test_a_models_extra_params_go_upstream(gateway: GatewayProcess, key: str) -> None:
    """`fields` lists them in extra_params and drops `seed` (drop_params): the fake names what it got."""
    raw = gateway.client(key).chat.completions.with_raw_response.create(
        model="fields",
        seed=7,
        temperature=0,
        messages=[{"role": "user", "content": "x"}],
        extra_body={"top_k": 3, "min_p": 0.1, "vendor_field": 1},
    )
    assert raw.parse().system_fingerprint == "fields:messages,min_p,model,temperature,top_k"
    assert raw.headers["x-costgate-dropped-params"] == "seed,vendor_field"


def test_fallback_answers_when_primary_fails(gateway: GatewayProcess, key: str) -> None:
    raw = gateway.client(key).chat.completions.with_raw_response.create(
        model="broken", messages=[{"role": "user", "content": "hi"}]
    )
    assert raw.headers["x-costgate-model"] == "small"


def test_models_lists_configured_models(gateway: GatewayProcess, key: str) -> None:
    ids = {m.id for m in gateway.client(key).models.list()}
    assert {"small", "large", "broken"} <= ids


def test_missing_key_is_401(gateway: GatewayProcess) -> None:
    with pytest.raises(openai.AuthenticationError) as err:
        gateway.client("sk-cg-not-a-real-key").chat.completions.create(
            model="small", messages=[{"role": "user", "content": "hi"}]
        )
    assert err.value.body["code"] == "invalid_api_key"


@pytest.mark.parametrize("stream", [False, True])
def test_every_answer_names_the_model_asked_for_and_carries_its_cost(
    gateway: GatewayProcess, key: str, stream: bool
) -> None:
    """As Responses and Messages answers do (issue 28, item 8): the body names the model the
    client asked for, `x-costgate-model` the one that answered (here `broken`'s fallback), and
    `usage.cost_usd` is the charge, whole or streamed, missed or replayed from the cache."""
    client = gateway.client(key)
    messages = [{"role": "user", "content": f"which model answers, stream={stream}"}]
    for cache in ("miss", "exact"):
        if stream:
            raw = client.chat.completions.with_raw_response.create(
                model="broken", messages=messages, stream=True, stream_options={"include_usage": True}
            )
            chunks = list(raw.parse())
            assert {c.model for c in chunks} == {"broken"}
            usage = chunks[-1].usage
        else:
            raw = client.chat.completions.with_raw_response.create(model="broken", messages=messages)
            completion = raw.parse()
            assert completion.model == "broken"
            usage = completion.usage
            assert usage.model_extra["cost_usd"] == raw.headers["x-costgate-cost-usd"]
        assert raw.headers["x-costgate-model"] == "small" and raw.headers["x-costgate-cache"] == cache
        assert usage is not None
        charged = Decimal(usage.model_extra["cost_usd"])
        assert charged == (expected_cost(usage) if cache == "miss" else 0)


def test_a_whole_completion_names_the_model_asked_for(gateway: GatewayProcess, key: str) -> None:
    raw = gateway.client(key).completions.with_raw_response.create(model="broken", prompt="say something")
    completion = raw.parse()
    assert completion.model == "broken" and raw.headers["x-costgate-model"] == "small"
    assert completion.usage is not None
    assert Decimal(completion.usage.model_extra["cost_usd"]) == expected_cost(completion.usage) > 0
