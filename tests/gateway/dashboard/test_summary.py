"""The dashboard's summary arithmetic (gateway/dashboard/queries.py `Summary`), on hand-made
window sums."""

from __future__ import annotations

from decimal import Decimal

from gateway.dashboard.queries import Fact, Summary


def fact(status: str, requests: int, errors: int = 0, saved: str = "0") -> Fact:
    return Fact("team_a", "m", "m", status, requests, errors, 10, 10, Decimal("0.01"), Decimal(saved))


def test_the_cache_hit_rate_counts_answered_requests_as_the_cache_page_does() -> None:
    """Refused requests (status >= 400) never reached the cache: the Overview and Savings
    tiles divide by the answered requests, like the Cache page's per-team rate."""
    summary = Summary((fact("miss", 6, errors=4), fact("exact", 1, saved="0.5"), fact("semantic", 1, saved="0.25")))
    cache = summary.cache()
    assert cache.requests == 4 and cache.hits == {"exact": 1, "semantic": 1}
    assert cache.hit_rate == 0.5 and cache.saved == Decimal("0.75")
    assert Summary(()).cache().hit_rate == 0.0
