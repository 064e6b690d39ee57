"""Cache settings -> per-team policies (pure functions)."""

from __future__ import annotations

import pytest

from gateway.caching.response_cache import backend_of, parse_duration, policies_from
from gateway.config.settings import CacheConfig


@pytest.mark.parametrize(
    "text, seconds",
    [
        ("7d", 7 * 86400),
        ("12h", 43200),
        ("30m", 1800),
        ("45s", 45),
        ("2w", 14 * 86400),
        ("90", 90),
        ("1.5h", 5400),
    ],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "7 days", "-1d", "d"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


def test_team_overrides_fall_back_to_the_global_settings() -> None:
    config = CacheConfig.model_validate(
        {
            "ttl": "1d",
            "semantic": {"enabled": False, "max_false_hit_rate": 0.05},
            "teams": {
                "a": {"semantic": True},
                "b": {"exact": False, "max_temperature": 1.0, "ttl": "1h", "verifier": "/v.npz"},
            },
        }
    )
    base, teams = policies_from(config)
    assert (base.exact, base.semantic, base.ttl_s, base.max_false_hit_rate) == (True, False, 86400, 0.05)
    assert teams["a"].semantic and teams["a"].max_false_hit_rate == 0.05 and teams["a"].ttl_s == 86400
    b = teams["b"]
    assert (b.exact, b.semantic, b.max_temperature, b.ttl_s, b.verifier) == (False, False, 1.0, 3600, "/v.npz")


@pytest.mark.parametrize(
    "backend, redis_url, chosen",
    [
        ("auto", None, "embedded"),
        ("auto", "redis://127.0.0.1:6379/0", "redis"),  # replicas given a Redis share their cache
        ("embedded", "redis://127.0.0.1:6379/0", "embedded"),  # unless the config keeps it per replica
        ("redis", "redis://127.0.0.1:6379/0", "redis"),
    ],
)
def test_the_backend_follows_redis_url_unless_named(backend: str, redis_url: str | None, chosen: str) -> None:
    assert backend_of(CacheConfig(backend=backend), redis_url) == chosen


def test_a_redis_backend_needs_a_redis_url() -> None:
    with pytest.raises(ValueError, match="redis_url"):
        backend_of(CacheConfig(backend="redis"), None)


def test_a_verifier_file_rewritten_on_disk_is_reloaded(tmp_path, caplog: pytest.LogCaptureFixture) -> None:
    """`costgate cache calibrate` rewrites a team's verifier file; the gateway picks it up
    within VERIFIER_CHECK_S, with no restart, and keeps the one it has when the new file
    cannot be read."""
    import logging
    import os

    from prometheus_client import CollectorRegistry

    from gateway.caching.response_cache import VERIFIER_CHECK_S, CacheMetrics, ResponseCache
    from policies.semantic_cache.store import EmbeddedStore
    from policies.semantic_cache.verifier import Verifier

    path = tmp_path / "team-verifier.npz"
    now = [100.0]

    def write(verifier: Verifier, mtime: int) -> None:
        verifier.save(path)
        os.utime(path, ns=(mtime, mtime))  # distinct whatever the filesystem's granularity

    write(Verifier.plain_cosine(0.90), 1_000_000_000)
    cache = ResponseCache(CacheConfig(), EmbeddedStore(10), CacheMetrics(CollectorRegistry()), path)
    cache.clock = lambda: now[0]
    assert cache.verifier_for(cache.base).min_cosine == 0.90
    write(Verifier.plain_cosine(0.95), 2_000_000_000)
    assert cache.verifier_for(cache.base).min_cosine == 0.90  # not looked at again yet
    now[0] += VERIFIER_CHECK_S
    assert cache.verifier_for(cache.base).min_cosine == 0.95
    assert list(tmp_path.iterdir()) == [path]  # written whole: no partial file left
    path.write_bytes(b"not a verifier")  # torn by hand
    os.utime(path, ns=(3_000_000_000, 3_000_000_000))
    now[0] += VERIFIER_CHECK_S
    with caplog.at_level(logging.WARNING, logger="costgate.cache"):
        assert cache.verifier_for(cache.base).min_cosine == 0.95
    assert "cannot be read" in caplog.text
    path.unlink()
    now[0] += VERIFIER_CHECK_S
    assert cache.verifier_for(cache.base).min_cosine == 0.95  # gone: the one loaded stays
