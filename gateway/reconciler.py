"""The ledger against a provider's bill (issue 26): `costgate reconcile` and
`GET /admin/reconcile` both call `reconcile_month`.

The ledger side is what costgate charged for the deployments whose calls that provider bills:
named by the caller, or found from the config (`anthropic/…` and Claude models, and deployments
serving the Messages API, bill to Anthropic; `openai/…` models and deployments at
api.openai.com bill to OpenAI). Each deployment's charges count under its upstream model's
family (policies/reconciliation.py), as the provider reports them.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from datetime import timedelta
from urllib.parse import urlparse

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from gateway.config.models_config import ModelConfig
from gateway.providers.cost_reports import Month, Provider, provider_costs
from gateway.storage.ledger import cost_by_day_and_model
from policies.reconciliation import Line, by_family, model_family, reconcile, summed


def bills_to(config: ModelConfig) -> Provider | None:
    model = config.upstream_model.lower()
    if model.startswith("anthropic/") or "claude" in model or "messages" in config.apis:
        return "anthropic"
    if model.startswith("openai/") or urlparse(config.api_base or "").hostname == "api.openai.com":
        return "openai"
    return None


def billed_models(models: Iterable[ModelConfig], provider: Provider, named: Collection[str] = ()) -> dict[str, str]:
    """Deployment name -> its upstream model's family, for the deployments `provider` bills."""
    return {
        m.name: model_family(m.upstream_model)
        for m in models
        if (m.name in named if named else bills_to(m) == provider)
    }


async def reconcile_month(
    engine: AsyncEngine,
    models: Iterable[ModelConfig],
    provider: Provider,
    month: str,
    admin_key: str,
    base_url: str | None = None,
    named: Collection[str] = (),
    transport: httpx.AsyncBaseTransport | None = None,
) -> list[Line]:
    span = Month.parse(month)
    families = billed_models(models, provider, named)
    last_day = (span.end - timedelta(days=1)).strftime("%Y-%m-%d")
    charged = await cost_by_day_and_model(engine, span.start.strftime("%Y-%m-%d"), last_day)
    ledger = summed(((day, families[name]), usd) for (day, name), usd in charged.items() if name in families)
    billed = by_family(await provider_costs(provider, span, admin_key, base_url, transport))
    return reconcile(ledger, billed)
