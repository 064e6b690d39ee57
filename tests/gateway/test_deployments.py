"""Deployments (gateway/upstream/deployments.py): each configured model's price (the config's, else
litellm's bundled map, else free for a local model), output cap, and provider client — and the
configs refused at startup. The upstream is httpx.MockTransport."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import httpx
import orjson
import pytest

from gateway.config.models_config import ModelConfig
from gateway.core.context import Endpoint
from gateway.providers.base import UpstreamCall
from gateway.providers.litellm import LiteLLMProvider
from gateway.providers.openai_compatible import OpenAIProvider
from gateway.providers.replicas import ReplicaSet
from gateway.upstream.deployments import DEFAULT_MAX_OUTPUT_TOKENS, build_deployments, build_provider, price_for
from policies.price_map import lookup
from policies.pricing import FREE, Price

MILLION = Decimal(1_000_000)


def config(**fields: Any) -> ModelConfig:
    return ModelConfig.model_validate({"name": "m", "api_base": "http://up.test/v1", **fields})


# gpt-4o-mini in litellm's map: list price, and its Batch API's (the cache rate at its discount)
MINI = Price(
    Decimal("1.5e-7"),
    Decimal("6e-7"),
    Decimal("7.5e-8"),
    batch=Price(Decimal("7.5e-8"), Decimal("3e-7"), Decimal("3.75e-8")),
    priority=Price(Decimal("2.5e-7"), Decimal("1e-6"), Decimal("1.25e-7")),
)


@pytest.mark.parametrize(
    "fields, price, cap",
    [
        # the config's price wins, per million tokens, exactly
        (
            {"price": {"input_per_mtok": "0.15", "output_per_mtok": "0.6"}},
            Price(Decimal("0.15") / MILLION, Decimal("0.6") / MILLION),
            DEFAULT_MAX_OUTPUT_TOKENS,
        ),
        (
            {"price": {"input_per_mtok": "3", "output_per_mtok": "15", "cached_input_per_mtok": "0.3"}},
            Price(Decimal(3) / MILLION, Decimal(15) / MILLION, Decimal("0.3") / MILLION),
            DEFAULT_MAX_OUTPUT_TOKENS,
        ),
        (
            {"price": {"input_per_mtok": "1", "output_per_mtok": "4", "reasoning_output_per_mtok": "8"}},
            Price(Decimal(1) / MILLION, Decimal(4) / MILLION, None, Decimal(8) / MILLION),
            DEFAULT_MAX_OUTPUT_TOKENS,
        ),
        # every tier and kind of token at its own price
        (
            {
                "price": {
                    "input_per_mtok": "3",
                    "output_per_mtok": "15",
                    "cached_input_per_mtok": "0.3",
                    "cache_write_per_mtok": "3.75",
                    "cache_write_1h_per_mtok": "6",
                    "batch": {"input_per_mtok": "1.5", "output_per_mtok": "7.5"},
                    "flex": {"input_per_mtok": "1", "output_per_mtok": "5", "cached_input_per_mtok": "0.1"},
                }
            },
            Price(
                Decimal(3) / MILLION,
                Decimal(15) / MILLION,
                Decimal("0.3") / MILLION,
                None,
                Decimal("3.75") / MILLION,
                Decimal(6) / MILLION,
                batch=Price(Decimal("1.5") / MILLION, Decimal("7.5") / MILLION),
                flex=Price(Decimal(1) / MILLION, Decimal(5) / MILLION, Decimal("0.1") / MILLION),
            ),
            DEFAULT_MAX_OUTPUT_TOKENS,
        ),
        # else litellm's bundled map, with its output cap
        ({"model": "gpt-4o-mini"}, MINI, 16384),
        ({"model": "openai/gpt-4o-mini"}, MINI, 16384),
        # the config's own cap overrides the map's; the config's price keeps the map's cap
        (
            {"model": "gpt-4o-mini", "max_output_tokens": 256},
            MINI,
            256,
        ),
        (
            {"model": "gpt-4o-mini", "price": {"input_per_mtok": 1, "output_per_mtok": 2}},
            Price(Decimal(1) / MILLION, Decimal(2) / MILLION),
            16384,
        ),
        # a local model nobody priced runs free
        ({"model": "./models/tiny", "provider": "local"}, FREE, DEFAULT_MAX_OUTPUT_TOKENS),
    ],
)
def test_price_and_output_cap(fields: dict[str, Any], price: Price, cap: int) -> None:
    assert price_for(config(**fields)) == (price, cap)


@pytest.mark.parametrize(
    "api_base, factor",
    [
        ("https://eu.api.openai.com/v1", Decimal("1.1")),  # a project with EU data residency
        ("https://us.api.openai.com/v1", Decimal("1.1")),
        ("https://gov.api.openai.com/v1", Decimal("1.1")),  # FedRAMP
        ("https://api.openai.com/v1", Decimal(1)),
        ("http://eu.api.openai.com.example/v1", Decimal(1)),  # the host, not a prefix of it
    ],
)
def test_openais_regional_hosts_bill_the_maps_uplift(api_base: str, factor: Decimal) -> None:
    listed = lookup("gpt-5.5")
    assert listed is not None
    price, _ = price_for(config(model="gpt-5.5", api_base=api_base))
    assert price == listed.price.scaled(factor)
    assert price.batch == (None if listed.price.batch is None else listed.price.batch.scaled(factor))
    configured, _ = price_for(
        config(model="gpt-5.5", api_base=api_base, price={"input_per_mtok": 1, "output_per_mtok": 2})
    )
    assert configured.input == Decimal(1) / MILLION  # a configured price is what the host bills


def test_an_unpriced_model_outside_the_map_is_refused_at_startup() -> None:
    with pytest.raises(ValueError, match="'my-finetune' is not in the price map"):
        price_for(config(model="my-finetune"))


@pytest.mark.parametrize(
    "fields, kind",
    [
        ({}, OpenAIProvider),
        ({"provider": "litellm", "model": "anthropic/claude-3-haiku-20240307", "api_base": None}, LiteLLMProvider),
        ({"replicas": ["http://up2.test/v1"], "price": {"input_per_mtok": 1, "output_per_mtok": 1}}, ReplicaSet),
    ],
)
def test_the_provider_client_follows_the_config(fields: dict[str, Any], kind: type) -> None:
    assert isinstance(build_provider(config(**fields)), kind)


def test_an_openai_compatible_model_needs_an_api_base() -> None:
    with pytest.raises(ValueError, match="needs an api_base"):
        build_provider(config(api_base=None))


async def test_a_deployment_calls_its_host_with_its_key_and_upstream_model_name() -> None:
    seen: list[httpx.Request] = []

    def upstream(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(
            200,
            json={
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": "up-7b",
                "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
            },
        )

    models = [config(name="small", model="up-7b", api_key="sk-up", price={"input_per_mtok": 1, "output_per_mtok": 2})]
    dep = build_deployments(models, httpx.MockTransport(upstream))["small"]
    assert dep.name == "small" and dep.price == Price(Decimal(1) / MILLION, Decimal(2) / MILLION)
    body = {"model": dep.config.upstream_model, "messages": [{"role": "user", "content": "hi"}]}
    completion = await dep.provider.complete(UpstreamCall(Endpoint.CHAT, body))
    assert completion.usage is not None and completion.usage.completion_tokens == 1
    [request] = seen
    assert str(request.url) == "http://up.test/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-up"
    assert orjson.loads(request.content)["model"] == "up-7b"
    await dep.provider.aclose()


def test_fallbacks_must_name_configured_models() -> None:
    priced = {"price": {"input_per_mtok": 1, "output_per_mtok": 1}}
    ok = build_deployments([config(name="a", fallbacks=["b"], **priced), config(name="b", **priced)])
    assert list(ok) == ["a", "b"] and ok["a"].config.fallbacks == ["b"]
    with pytest.raises(ValueError, match=r"model 'a': unknown fallbacks \['c'\]"):
        build_deployments([config(name="a", fallbacks=["b", "c"], **priced), config(name="b", **priced)])


@pytest.mark.parametrize(
    "fields",
    [
        {"provider": "litellm", "model": "anthropic/claude-haiku-4-5", "apis": ["chat", "responses"]},
        {"replicas": ["http://127.0.0.1:9/v1"], "apis": ["chat", "messages"]},
    ],
)
def test_a_native_api_needs_one_http_upstream(fields: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="need provider openai with one api_base"):
        ModelConfig(**{"name": "m", "api_base": "http://127.0.0.1:9/v1", **fields})


@pytest.mark.parametrize(
    "fields, native",
    [
        ({"provider": "litellm", "model": "anthropic/claude-haiku-4-5"}, {"messages"}),  # litellm's passthrough
        ({"provider": "litellm", "model": "bedrock/anthropic.claude-x", "apis": ["chat", "messages"]}, {"messages"}),
        ({"provider": "litellm", "model": "gemini/gemini-2.5-flash"}, set()),
        ({"api_base": "http://127.0.0.1:9/v1", "apis": ["chat", "responses"]}, {"responses"}),
    ],
)
def test_which_apis_a_model_serves_natively(fields: dict[str, Any], native: set[str]) -> None:
    assert ModelConfig(**{"name": "m", **fields}).native_apis == native


@pytest.mark.parametrize(
    "model, sent",
    [
        ("gpt-4o-mini", False),  # the price map: no reasoning; OpenAI would answer 400
        ("o3-mini", True),
        ("my-own-model", True),  # unknown to the map: the upstream judges
    ],
)
def test_reasoning_effort_reaches_only_models_that_reason(model: str, sent: bool) -> None:
    """Claude Code's effort and Codex's reasoning map to reasoning_effort (issue 29): a model the
    price map knows not to reason gets it dropped and named, not a 400."""
    priced = {"price": {"input_per_mtok": 1, "output_per_mtok": 1}}
    dep = build_deployments([config(name="m", model=model, **priced)])["m"]
    kept, dropped = dep.fields.split("chat.completions", {"model": "m", "messages": [], "reasoning_effort": "medium"})
    assert ("reasoning_effort" in kept) is sent and (dropped == ()) is sent
