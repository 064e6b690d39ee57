"""The gateway's configuration: a YAML file (DESIGN.md's contract fields) or embedded defaults.

Strings of the form `env:NAME` are read from the environment when the file is loaded, so a
config can live in a ConfigMap while secrets stay in a Secret.
"""

from __future__ import annotations

import os
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator

from gateway.config.limits_config import AlertSettings, BudgetSettings, PlanSettings, RateLimitSettings
from gateway.config.models_config import ModelConfig, PromptCacheConfig, default_local_models, default_models
from policies.breaker import BreakerConfig


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


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
    # How long a stopping gateway lets lines in flight finish (their results kept) before it
    # leaves the rest to the next start; lines at a provider's batch are polled again then.
    shutdown_grace_s: float = Field(default=5.0, ge=0)


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


def admin_key_file(data_dir: str | Path) -> Path:
    """Where the admin key generated on first start is kept, when the config sets none
    (written by the gateway, read by the dashboard's sign-in page and the admin commands)."""
    return Path(data_dir) / "admin_key"


def resolve_env(value: Any, environ: dict[str, str]) -> Any:
    """Replace every `env:NAME` string in a parsed YAML tree by the variable's value."""
    if isinstance(value, str) and value.startswith("env:"):
        return environ.get(value[4:])
    if isinstance(value, dict):
        return {k: resolve_env(v, environ) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve_env(v, environ) for v in value]
    return value


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
