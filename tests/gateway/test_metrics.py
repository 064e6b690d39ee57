from __future__ import annotations

from decimal import Decimal

import pytest

from gateway.core.context import CacheStatus, Endpoint, RequestContext
from gateway.metrics import Metrics, saving_reason


def ctx(cache: CacheStatus = CacheStatus.MISS, price_factor: Decimal = Decimal(1)) -> RequestContext:
    c = RequestContext(request_id="r", endpoint=Endpoint.CHAT, body={}, api_key=None, headers={})
    c.outcome.cache_status, c.decided.price_factor, c.outcome.provider = cache, price_factor, "local"
    return c


@pytest.mark.parametrize(
    "cache, factor, reason",
    [
        (CacheStatus.EXACT, Decimal(1), "exact"),
        (CacheStatus.SEMANTIC, Decimal(1), "semantic"),
        (CacheStatus.MISS, Decimal("0.5"), "batch"),
        (CacheStatus.MISS, Decimal(1), "other"),
    ],
)
def test_saving_reason(cache: CacheStatus, factor: Decimal, reason: str) -> None:
    assert saving_reason(ctx(cache, factor)) == reason


def test_registry_is_per_app() -> None:
    a, b = Metrics(), Metrics()
    a.observe(ctx())
    assert b"costgate_requests_total" in a.render()
    assert 'costgate_requests_total{cache="miss"' in a.render().decode()
    assert 'costgate_requests_total{cache="miss"' not in b.render().decode()
