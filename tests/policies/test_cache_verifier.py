"""The shipped verifier at the default bound, and the arithmetic that fits and certifies one."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from policies.exact_cache import CachePolicy
from policies.semantic_cache.crossval import cross_validate, summarise
from policies.semantic_cache.differences import Parsed
from policies.semantic_cache.embedder import Embedder
from policies.semantic_cache.verifier import Verifier
from policies.semantic_cache.verifier_calibration import (
    Labelled,
    choose_threshold,
    examples,
    fit_logistic,
    lookups,
    upper_bound,
    verifier_from,
)

DEFAULT = CachePolicy().max_false_hit_rate


@pytest.fixture(scope="module")
def verifier() -> Verifier:
    return Verifier.load()


def accepts(embedder: Embedder, verifier: Verifier, stored: str, asked: str, rate: float = DEFAULT) -> bool:
    cosine = float(embedder.embed(stored) @ embedder.embed(asked))
    return verifier.accepts(Parsed.of(asked), Parsed.of(stored), cosine, rate)


def test_the_default_bound_is_certified(verifier) -> None:
    assert verifier.threshold_for(DEFAULT) is not None
    assert max(verifier.rates) >= DEFAULT


@pytest.mark.parametrize(
    "stored, asked",
    [
        ("What is the best pizza in Boston?", "What is the best pizza in Austin?"),
        ("How do I lose 5 kg?", "How do I lose 50 kg?"),
        ("How do I lose five kg?", "How do I lose 50 kg?"),
        ("Why did Spain beat Italy?", "Why did Italy beat Spain?"),
        ("Is it safe to drink coffee while pregnant?", "Is it not safe to drink coffee while pregnant?"),
        ("Which is a good rehab center near San Juan County?", "Which is a good rehab center near San Miguel County?"),
        (
            "What are some ideas for a 6th grade science project?",
            "What are some ideas for a 10th grade science project?",
        ),
        ("如何学习日语？", "如何学习韩语？"),
    ],
)
def test_near_misses_are_refused_even_at_the_loosest_bound(embedder, verifier, stored: str, asked: str) -> None:
    assert not accepts(embedder, verifier, stored, asked, rate=float(max(verifier.rates)))


@pytest.mark.parametrize(
    "stored, asked",
    [
        ("cheap hotels in Rome", "cheap pet-friendly hotels in Rome"),
        ("Why are cats so lazy?", "Are cats lazy?"),
        ("What is happening in Venezuela?", "What is happening in Venezuela and why?"),
    ],
)
def test_narrower_or_other_questions_are_refused_at_the_default(embedder, verifier, stored: str, asked: str) -> None:
    assert not accepts(embedder, verifier, stored, asked)


@pytest.mark.parametrize(
    "stored, asked",
    [
        ("How do I learn Python quickly?", "How can I learn Python quickly?"),
        ("How can I lose weight fast?", "How do I lose weight fast?"),
        ("What are the benefits of drinking green tea?", "What are the advantages of drinking green tea?"),
        ("How can I stop procrastinating?", "How do I stop procrastinating?"),
    ],
)
def test_paraphrases_are_served_at_the_default(embedder, verifier, stored: str, asked: str) -> None:
    assert accepts(embedder, verifier, stored, asked)


def test_the_same_words_are_served_at_any_bound(embedder, verifier) -> None:
    assert accepts(embedder, verifier, "How can I lose weight fast?", "how can i lose weight FAST", rate=0.001)
    assert verifier.threshold_for(0.001) is None  # no threshold is that safe: only the same words
    assert not accepts(
        embedder, verifier, "How do I learn Python quickly?", "How can I learn Python quickly?", rate=0.001
    )


def test_a_bound_between_calibrated_ones_takes_the_stricter(verifier) -> None:
    rates = list(verifier.rates)
    low, high = rates[0], rates[1]
    assert verifier.threshold_for((low + high) / 2) == verifier.threshold_for(low)
    assert verifier.threshold_for(low) >= verifier.threshold_for(high)


def test_save_and_load(tmp_path: Path, verifier) -> None:
    verifier.save(tmp_path / "v.npz")
    again = Verifier.load(tmp_path / "v.npz")
    assert np.array_equal(again.weights, verifier.weights) and np.array_equal(again.thresholds, verifier.thresholds)
    np.savez(
        tmp_path / "old.npz",
        weights=np.zeros(3),
        rates=np.zeros(1),
        thresholds=np.zeros(1),
        min_cosine=np.array(0.9),
        names=np.array(["bias", "cosine", "veto"]),
    )
    with pytest.raises(ValueError, match="calibrate"):
        Verifier.load(tmp_path / "old.npz")


@pytest.mark.parametrize(
    "wrong, n, expected",
    [
        (0, 100, 1 - 0.05 ** (1 / 100)),  # the "rule of three" case, exactly
        (0, 0, 1.0),
        (10, 10, 1.0),
        (0, 1, 0.95),
    ],
)
def test_upper_bound_known_values(wrong: int, n: int, expected: float) -> None:
    assert upper_bound(wrong, n) == pytest.approx(expected, abs=1e-6)


def test_upper_bound_is_above_the_observed_rate_and_shrinks_with_n() -> None:
    assert upper_bound(5, 100) > 0.05
    assert upper_bound(50, 1000) < upper_bound(5, 100)


@pytest.mark.parametrize(
    "scores, wrong, rate, expected",
    [
        ([0.9] * 300 + [0.5] * 300, [False] * 300 + [True] * 300, 0.02, 0.9),  # stop before the bad block
        ([0.9] * 10, [False] * 10, 0.02, None),  # too few hits to be sure of anything
        ([0.9] * 300 + [0.5] * 300, [False] * 600, 0.02, 0.5),
        ([0.9] * 300 + [0.8] * 300, [True] * 300 + [False] * 300, 0.1, None),  # the best-scored are wrong
    ],
)
def test_choose_threshold(scores, wrong, rate: float, expected: float | None) -> None:
    assert choose_threshold(np.array(scores), np.array(wrong), rate) == expected


def test_fit_logistic_separates_a_simple_problem_on_any_scale() -> None:
    x = np.column_stack([np.ones(200), np.linspace(0.9, 1.0, 200)])  # a narrow column, as cosines are
    y = (x[:, 1] > 0.95).astype(float)
    w = fit_logistic(x, y, l2=0.1)
    assert w[1] > 0 and -w[0] / w[1] == pytest.approx(0.95, abs=0.01)  # the boundary sits at 0.95


def synthetic(n_queries: int) -> list[Labelled]:
    """Queries, each with a paraphrase (same) and a query that asks for more (different: one
    word swapped for another is vetoed, so the model would never see it)."""
    things = [
        f"{verb} {noun}"
        for verb in ("cook", "buy", "fix", "paint", "clean", "sell", "store", "carry")
        for noun in ("rice", "a bike", "a fence", "a sofa", "shoes", "a lamp", "tyres", "a boat")
    ]
    out = []
    for i in range(n_queries):
        thing, other = things[i % len(things)], things[(i * 7 + 3) % len(things)]
        city = ("Paris", "Lima", "Oslo", "Kyiv", "Cairo")[i % 5]
        out.append(Labelled(f"How do I {thing} in {city}?", f"How can I {thing} in {city}?", True))
        out.append(Labelled(f"How do I {thing} in {city}?", f"How do I {thing} and {other} in {city}?", False))
    return out


def embed_words(texts: list[str]) -> np.ndarray:
    """A stand-in embedding (bag of words, unit length): enough to exercise the fitting."""
    vocab = sorted({w for t in texts for w in t.lower().strip("?").split()})
    rows = np.array([[t.lower().strip("?").split().count(w) for w in vocab] for t in texts], dtype=float)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_folds_keep_a_query_and_its_twins_together() -> None:
    labelled = synthetic(60) + [Labelled("how do I COOK rice in Paris", "How do I cook rice in Paris?", True)]
    ex = examples(labelled, embed_words)
    folds = ex.folds()
    for g in np.unique(ex.group):
        assert len(set(folds[ex.group == g])) == 1
    assert len(set(folds)) == 5 and ex.identical[-1]
    assert len(lookups(ex)) == len(np.unique(ex.group))  # one lookup per query: its nearest candidate


def test_cross_validation_serves_each_fold_with_a_verifier_that_never_saw_it() -> None:
    ex = examples(synthetic(400), embed_words)
    results = cross_validate(ex, rates=(0.05,))
    assert sorted(r.fold for r in results) == [0, 1, 2, 3, 4]
    pooled = summarise(results, 0.05)
    assert pooled.queries_with_same == len(np.unique(ex.group))  # every query has its paraphrase
    assert pooled.precision >= 0.95 and pooled.served > 0.5
    verifier = verifier_from(ex, rates=(0.05,))
    assert verifier.threshold_for(0.05) is not None
