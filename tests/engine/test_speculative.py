"""The speculative accept rule (its outputs follow the target exactly), vLLM's config, and the on/off policy."""

from __future__ import annotations

import numpy as np
import pytest

from engine.speculative import SpeculationPolicy, residual, should_speculate, speculative_config, verify

V = 6


def _dist(rng: np.random.Generator, concentration: float) -> np.ndarray:
    return rng.dirichlet(np.full(V, concentration))


def _first_token_counts(p: np.ndarray, q: np.ndarray, k: int, samples: int, seed: int) -> np.ndarray:
    """Run the full draft-then-verify loop; count the first emitted token."""
    rng = np.random.default_rng(seed)
    counts = np.zeros(V)
    drafts_q = np.tile(q, (k, 1))
    targets = np.tile(p, (k + 1, 1))
    for _ in range(samples):
        draft = [int(rng.choice(V, p=q)) for _ in range(k)]
        counts[verify(draft, drafts_q, targets, rng).tokens[0]] += 1
    return counts


def _chi_square(counts: np.ndarray, p: np.ndarray) -> float:
    expected = counts.sum() * p
    return float(((counts - expected) ** 2 / expected).sum())


# 99.9th percentile of chi-square with V - 1 = 5 degrees of freedom.
CHI2_5_999 = 20.52


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_emitted_tokens_follow_the_target_distribution(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    p, q = _dist(rng, 1.0), _dist(rng, 0.5)  # a draft quite unlike the target
    counts = _first_token_counts(p, q, k=2, samples=20_000, seed=seed)
    assert _chi_square(counts, p) < CHI2_5_999
    assert 0.5 * np.abs(counts / counts.sum() - p).sum() < 0.02  # total variation distance


def test_the_test_detects_a_wrong_rule() -> None:
    """The same statistic rejects the draft's own distribution, so it has the power to fail."""
    rng = np.random.default_rng(101)
    p, q = _dist(rng, 1.0), _dist(rng, 0.5)
    sampled = np.bincount(np.random.default_rng(1).choice(V, size=20_000, p=q), minlength=V)
    assert _chi_square(sampled, p) > CHI2_5_999


@pytest.mark.slow  # takes seconds in process: out of the fast lane
def test_second_position_follows_the_target_given_the_first_was_accepted() -> None:
    rng = np.random.default_rng(7)
    p1, p2, q1, q2, p3 = (_dist(rng, 1.0) for _ in range(5))
    counts = np.zeros(V)
    run = np.random.default_rng(8)
    for _ in range(30_000):
        draft = [int(run.choice(V, p=q1)), int(run.choice(V, p=q2))]
        out = verify(draft, np.stack([q1, q2]), np.stack([p1, p2, p3]), run)
        if len(out.tokens) >= 2:
            counts[out.tokens[1]] += 1
    assert _chi_square(counts, p2) < CHI2_5_999


def test_identical_draft_is_always_accepted_and_earns_a_bonus_token() -> None:
    p = np.array([0.5, 0.25, 0.25, 0, 0, 0])
    rng = np.random.default_rng(0)
    for _ in range(200):
        draft = [int(rng.choice(V, p=p)) for _ in range(3)]
        out = verify(draft, np.tile(p, (3, 1)), np.tile(p, (4, 1)), rng)
        assert out.accepted == 3 and len(out.tokens) == 4 and out.tokens[:3] == draft


def test_a_draft_token_the_target_forbids_is_always_rejected() -> None:
    p = np.array([0.0, 1.0, 0, 0, 0, 0])
    q = np.array([1.0, 0.0, 0, 0, 0, 0])
    out = verify([0], q[None], np.stack([p, p]), np.random.default_rng(0))
    assert out == out.__class__([1], 0)


@pytest.mark.parametrize(
    ("p", "q", "expected"),
    [
        ([0.5, 0.5, 0, 0, 0, 0], [1.0, 0, 0, 0, 0, 0], [0, 1.0, 0, 0, 0, 0]),
        ([0.6, 0.4, 0, 0, 0, 0], [0.2, 0.8, 0, 0, 0, 0], [1.0, 0, 0, 0, 0, 0]),
        ([0.3, 0.7, 0, 0, 0, 0], [0.3, 0.7, 0, 0, 0, 0], [0.3, 0.7, 0, 0, 0, 0]),  # p == q: no residual mass
    ],
)
def test_residual_distribution(p: list[float], q: list[float], expected: list[float]) -> None:
    assert np.allclose(residual(np.array(p), np.array(q)), expected)


def test_verify_checks_shapes() -> None:
    with pytest.raises(ValueError):
        verify([1, 2], np.ones((2, V)) / V, np.ones((2, V)) / V, np.random.default_rng(0))


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({}, None),
        ({"method": "ngram", "enabled": False}, None),
        (
            {"method": "ngram", "num_speculative_tokens": 4},
            {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2, "prompt_lookup_max": 5},
        ),
        (
            {"model": "/m/draft", "num_speculative_tokens": 3},
            {
                "method": "draft_model",
                "model": "/m/draft",
                "num_speculative_tokens": 3,
                "draft_sample_method": "probabilistic",
            },
        ),
        (
            {"model": "/m/draft", "exact": False},
            {"method": "draft_model", "model": "/m/draft", "num_speculative_tokens": 4},
        ),
    ],
)
def test_speculative_config(spec: dict, expected: dict | None) -> None:
    assert speculative_config(spec) == expected


@pytest.mark.parametrize(
    "spec",
    [
        {"method": "ngram", "num_speculative_tokens": 0},
        {"method": "ngram", "prompt_lookup_min": 4, "prompt_lookup_max": 2},
        {"method": "draft_model"},
    ],
)
def test_speculative_config_rejects_nonsense(spec: dict) -> None:
    with pytest.raises(ValueError):
        speculative_config(spec)


POLICY = SpeculationPolicy(min_acceptance=0.3, max_running=8, hysteresis=0.05, min_drafts=50)


@pytest.mark.parametrize(
    ("on", "acceptance", "drafts", "running", "expected"),
    [
        (True, None, 0, 1, True),  # nothing measured: keep what is configured
        (False, None, 0, 1, False),
        (True, 0.9, 10, 1, True),  # too few drafts to judge
        (True, 0.1, 10, 1, True),
        (True, 0.6, 1000, 1, True),  # pays at low load
        (True, 0.1, 1000, 1, False),  # low acceptance: verifier work wasted
        (True, 0.27, 1000, 1, True),  # inside the hysteresis band: stays on
        (False, 0.33, 1000, 1, False),  # inside the band: stays off
        (False, 0.36, 1000, 1, True),  # clearly above: back on
        (True, 0.9, 1000, 8, False),  # high load: throughput-bound, speculation slows it down
        (True, 0.9, 1000, 12.5, False),
        (False, 0.9, 1000, 7.9, True),
        (True, None, 0, 9, False),  # high load wins even before acceptance is known
    ],
)
def test_speculation_policy(on: bool, acceptance: float | None, drafts: int, running: float, expected: bool) -> None:
    assert should_speculate(POLICY, on, acceptance, drafts, running) is expected
