"""The routing policies' live gauges, read at scrape time (gateway/routing/cascade_metrics.py), and the
scorer a cascade's `scorer:` setting names (gateway/routing/build.py), and the MiniLM its
cascades share with the semantic cache."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from gateway.config.settings import Settings
from gateway.routing.build import build_scorer
from gateway.routing.cascade_metrics import PolicyMetrics
from gateway.routing.confidence import PureConfidence
from gateway.routing.judge import JudgeScorer
from gateway.service import build_gateway
from gateway.stages.compress import Compress
from policies.breaker import BreakerConfig, Breakers
from policies.quality_controller import Estimate, Mode
from policies.scorers.learned import LearnedScorer
from policies.scorers.logprob import LogprobScorer
from policies.scorers.rules import RuleScorer
from tests.gateway.fakes import deployment, guarded
from tests.support import model


def estimate(threshold: float | None, samples: int, agreement: float | None, lower: float | None) -> Estimate:
    mode = Mode.LEARNING if threshold is None else Mode.CERTIFIED
    return Estimate(
        mode,
        threshold,
        samples,
        float(samples),
        agreement,
        lower,
        1.0,
        1.0,
        1.0,
        0.0,
        0.5,
        "default",
        "none",
        True,
        "",
        True,
    )


def test_breaker_states_and_cascade_estimates_are_read_when_scraped() -> None:
    registry = CollectorRegistry()
    breakers = Breakers(BreakerConfig(min_requests=1, max_error_rate=0.0, min_failing_teams=1), clock=lambda: 0.0)
    estimates: dict[str, Estimate] = {"auto": estimate(None, 3, None, None)}
    PolicyMetrics(registry).watch(breakers, lambda: estimates)
    breakers.record("small", True, "team")
    value = registry.get_sample_value
    assert value("costgate_breaker_state", {"deployment": "small", "state": "closed"}) == 1
    assert value("costgate_breaker_state", {"deployment": "small", "state": "open"}) == 0
    assert value("costgate_cascade_shadow_samples", {"cascade": "auto"}) == 3
    # no threshold and no agreement yet: absent, not a made-up zero
    assert value("costgate_cascade_threshold", {"cascade": "auto"}) is None
    assert value("costgate_cascade_agreement", {"cascade": "auto"}) is None

    breakers.record("small", False, "team")  # the state changes; the next scrape shows it
    estimates["auto"] = estimate(0.7, 150, 0.96, 0.93)
    assert value("costgate_breaker_state", {"deployment": "small", "state": "open"}) == 1
    assert value("costgate_breaker_state", {"deployment": "small", "state": "closed"}) == 0
    assert value("costgate_breaker_teams_open", {"deployment": "small"}) == 1
    assert value("costgate_cascade_threshold", {"cascade": "auto"}) == 0.7
    assert value("costgate_cascade_agreement", {"cascade": "auto"}) == 0.96
    assert value("costgate_cascade_agreement_lower_bound", {"cascade": "auto"}) == 0.93


def test_compression_and_router_counters_carry_their_labels() -> None:
    registry = CollectorRegistry()
    metrics = PolicyMetrics(registry)
    metrics.compression_tokens_saved.labels("small").inc(120)
    metrics.router_choices.labels("cost-router", "large").inc()
    assert registry.get_sample_value("costgate_compression_tokens_saved_total", {"model": "small"}) == 120
    assert registry.get_sample_value("costgate_router_choices_total", {"router": "cost-router", "model": "large"}) == 1


@pytest.mark.parametrize(
    "spec, scorer", [("rules", RuleScorer), ("logprob", LogprobScorer), ("learned", LearnedScorer)]
)
def test_pure_scorers_by_name(spec: str, scorer: type) -> None:
    built = build_scorer(spec, {}, guarded())
    assert isinstance(built, PureConfidence) and isinstance(built.scorer, scorer)
    assert built.needs_logprobs is (scorer is LogprobScorer)


def test_a_judge_scores_with_the_named_deployment() -> None:
    judge = deployment("grader")
    built = build_scorer("judge:grader", {"grader": judge}, guarded())
    assert isinstance(built, JudgeScorer) and built.dep is judge


@pytest.mark.parametrize(
    "spec, message",
    [
        ("judge:nobody", "unknown judge model 'nobody'"),
        ("learned:/no/such/file.json", "no such file"),
        ("vibes", "unknown scorer 'vibes'"),
    ],
)
def test_a_scorer_that_cannot_be_built_is_a_config_error(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build_scorer(spec, {"small": deployment("small")}, guarded())


async def test_the_cache_and_the_cascades_share_one_minilm(tmp_path) -> None:
    """One model and one worker thread a gateway: the semantic cache's second stage and the
    cascades' query vectors (gateway/caching/minilm.py)."""
    settings = Settings.model_validate(
        {
            "admin_key": "k",
            "database_url": f"sqlite:///{tmp_path}/costgate.db",
            "data_dir": str(tmp_path / "data"),
            "models": [model("weak", "w", "http://127.0.0.1:9/v1"), model("strong", "s", "http://127.0.0.1:9/v1")],
            "cascades": [{"name": "auto", "tiers": ["weak", "strong"], "scorer": "learned"}],
        }
    )
    gateway = build_gateway(settings)
    try:
        minilm = gateway.routing.minilm
        assert minilm is not None and gateway.cache.minilm is minilm
        assert gateway.routing.cascades["auto"].services.embed == minilm.embed_many
        vectors = await minilm.embed_many(["How far is the moon?"])
        assert vectors.shape == (1, 384)
    finally:
        gateway.cache.minilm.close()
        await gateway.db.dispose()


@pytest.mark.parametrize("on", [False, True])
async def test_a_feature_left_off_is_not_on_the_request_path(tmp_path, on: bool) -> None:
    """Compression off: no compress stage; no cascade: nothing to tell when a request settles
    (the tally and shadow sample are a cascade's). On, both are there. An unknown summarizer is
    a config error either way."""
    models = [model("weak", "w", "http://127.0.0.1:9/v1"), model("strong", "s", "http://127.0.0.1:9/v1")]
    config = {
        "admin_key": "k",
        "database_url": f"sqlite:///{tmp_path}/costgate.db",
        "data_dir": str(tmp_path / "data"),
        "models": models,
        "compression": {"enabled": on},
        "cascades": [{"name": "auto", "tiers": ["weak", "strong"], "scorer": "rules"}] if on else [],
    }
    gateway = build_gateway(Settings.model_validate(config))
    try:
        stages = [type(stage) for stage in gateway.pipeline.stages]
        assert (Compress in stages) is on
        assert (gateway.pipeline.settled is not None) is on
    finally:
        await gateway.db.dispose()
    config["compression"] = {"enabled": on, "summarizer": "nobody"}
    with pytest.raises(ValueError, match="unknown summarizer"):
        build_gateway(Settings.model_validate(config))
