"""Deployments: each configured model with its provider client, price and limits."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from urllib.parse import urlparse

import httpx

from gateway.config.models_config import ModelConfig, TierPriceConfig
from gateway.config.settings import TeamConfig
from gateway.core.request_fields import FieldPolicy, for_provider
from gateway.providers.base import Provider
from gateway.providers.batch_api import ProviderBatcher
from gateway.providers.litellm import LiteLLMProvider
from gateway.providers.openai_compatible import OpenAIProvider
from gateway.providers.replicas import replica_set
from gateway.upstream.prompt_markers import CachePlan
from gateway.upstream.server_tools import NONE, ServerTool, resolve
from policies.price_map import lookup
from policies.pricing import FREE, LongContext, Price

DEFAULT_MAX_OUTPUT_TOKENS = 4096


@dataclass(frozen=True, slots=True)
class Deployment:
    config: ModelConfig
    provider: Provider
    price: Price
    max_output_tokens: int
    fields: FieldPolicy = FieldPolicy()  # what of a client's body this deployment is sent
    caching: CachePlan = CachePlan()  # the marks its provider's prompt cache needs (gateway/upstream/prompt_markers.py)
    batcher: ProviderBatcher | None = None  # its provider's Batch API, when config `batch_api` is on
    # provider-run tools it is priced for (gateway/upstream/server_tools.py)
    server_tools: Mapping[str, ServerTool] = field(default_factory=lambda: NONE)

    @property
    def name(self) -> str:
        return self.config.name


def price_for(config: ModelConfig) -> tuple[Price, int]:
    """The config's price when it names one, else litellm's bundled map, else free (a local model)."""
    info = lookup(config.upstream_model)
    limit = config.max_output_tokens or (info.max_output_tokens if info else None) or DEFAULT_MAX_OUTPUT_TOKENS
    if config.price is not None:
        p = config.price
        listed = _per_token(p)
        longer = tuple(
            LongContext(t.above_tokens, _per_token(t)) for t in sorted(p.long_context, key=lambda t: t.above_tokens)
        )
        batch, flex, priority, ultrafast = (
            None if tier is None else _discounted(_per_token(tier), listed, longer)
            for tier in (p.batch, p.flex, p.priority, p.ultrafast)
        )
        premiums = info.price.premiums if info is not None else ()  # the provider's, on the config's rates
        return (
            replace(
                listed,
                batch=batch,
                flex=flex,
                priority=priority,
                ultrafast=ultrafast,
                long_context=longer,
                premiums=premiums,
            ),
            limit,
        )
    if info is not None:  # at the uplift OpenAI's regional hosts bill (a configured price is what the host bills)
        return info.at_host(urlparse(config.api_base).hostname if config.api_base else None), limit
    if config.provider == "local":
        return FREE, limit
    raise ValueError(
        f"model {config.name!r}: {config.upstream_model!r} is not in the price map; give it a `price:` in the config"
    )


def _discounted(tier: Price, listed: Price, longer: tuple[LongContext, ...]) -> Price:
    """A tier's price with the long-prompt prices at its discount on input (batch: about half)."""
    if not longer or not listed.input:
        return tier
    factor = tier.input / listed.input
    return replace(tier, long_context=tuple(LongContext(t.above_tokens, t.price.scaled(factor)) for t in longer))


def _per_token(p: TierPriceConfig) -> Price:
    return Price.per_million(
        p.input_per_mtok,
        p.output_per_mtok,
        p.cached_input_per_mtok,
        p.reasoning_output_per_mtok,
        p.cache_write_per_mtok,
        p.cache_write_1h_per_mtok,
    )


# What a model the price map knows as a non-reasoning one is never sent: OpenAI refuses
# `reasoning_effort` for such a model with a 400, and the Messages and Responses translations
# map Claude Code's effort and Codex's reasoning to it by default (issue 29).
REASONING_FIELDS = ("reasoning_effort",)


def field_policy(config: ModelConfig) -> FieldPolicy:
    drop = list(config.drop_params)
    info = lookup(config.upstream_model)
    if info is not None and not info.reasons and "reasoning_effort" not in (config.extra_params or ()):
        drop += REASONING_FIELDS
    return for_provider(config.provider, config.extra_params, drop)


def build_provider(
    config: ModelConfig, transport: httpx.AsyncBaseTransport | None = None, data_dir: str = "./costgate-data"
) -> Provider:
    if config.replicas:  # several OpenAI-compatible servers of one model: admission + failover
        return replica_set(config, price_for(config)[1], transport)
    if config.provider == "local" and not config.api_base:  # the bundled engine: costgate runs vLLM itself
        from gateway.providers.local import local_provider

        return local_provider(config, data_dir)  # the default model and engine logs live in the data dir
    if config.provider == "litellm":
        return LiteLLMProvider(
            config.name,
            config.upstream_model,
            config.api_key,
            config.api_base,
            timeout_s=config.timeout_s,
            max_retries=config.max_retries,
            fields=field_policy(config),
        )
    if not config.api_base:
        raise ValueError(f"model {config.name!r}: provider {config.provider!r} needs an api_base")
    return OpenAIProvider(
        config.name,
        config.api_base,
        config.api_key,
        timeout_s=config.timeout_s,
        connect_timeout_s=config.connect_timeout_s,
        max_retries=config.max_retries,
        transport=transport,
    )


def build_deployments(
    models: list[ModelConfig],
    transport: httpx.AsyncBaseTransport | None = None,
    data_dir: str = "./costgate-data",
    teams: Mapping[str, TeamConfig] | None = None,
    share_provider_cache: bool = False,
) -> dict[str, Deployment]:
    deployments = {}
    for config in models:
        price, limit = price_for(config)
        provider = build_provider(config, transport, data_dir)
        if config.provider == "local" and config.price is None and hasattr(provider, "price"):
            price = provider.price  # the local engine's measured price (engine/cost.py LivePrice)
        caching = CachePlan.of(config, teams or {}, share_provider_cache)
        info = lookup(config.upstream_model)
        tools = resolve(config, info.per_search if info is not None else None)
        deployments[config.name] = Deployment(
            config, provider, price, limit, field_policy(config), caching, server_tools=tools
        )
    for dep in deployments.values():
        unknown = [f for f in dep.config.fallbacks if f not in deployments]
        if unknown:
            raise ValueError(f"model {dep.name!r}: unknown fallbacks {unknown}")
    return deployments
