"""Held-out estimates from out-of-fold scores, beside the fold replays of bench/cascade_offline.py:
what a scorer trained on every problem would do on problems like them it never saw, with a
bootstrap of how far one run strays (`estimate_held_out`), and why a scorer fitted on agreement
alone certifies nothing on this data (`agreement_bound`). Run through
`python bench/cascade_offline.py --estimate SEEDS` and `--learning ORDERS`."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

import numpy as np

from bench.gsm8k_problems import Problem, training_examples
from policies.quality_controller import Policy, QualityController
from policies.scorers.learned import auc
from policies.scorers.rules import rule_violation
from policies.scorers.training import Matrix, TrainingExample, out_of_fold, train_scorer

DRAWS = 200  # bootstrap runs a split, for the held-out estimate's spread


def agreement_bound(problems: Sequence[Problem]) -> None:
    """Why the default cascade certifies nothing here: a scorer fitted on agreement alone (the only
    label traffic gives), out of fold over all the problems; at its most confident shares, the
    share of all requests that disagree (what the bound counts as lost, λ = 1) against the
    accuracy really lost."""
    examples = [TrainingExample(p.item, p.agrees, None, p.agrees) for p in problems]
    scores = out_of_fold(Matrix.of(examples), 10, 10.0, 0)
    agrees = np.array([p.agrees for p in problems])
    weak = np.array([p.weak_right for p in problems])
    strong = np.array([p.strong_right for p in problems])
    order = np.argsort(-scores)
    print(f"\nagreement alone (10-fold out-of-fold, AUC {auc_of(scores, agrees):.3f}): at the most confident share")
    for share in (0.2, 0.3, 0.4):
        top = order[: int(share * len(problems))]
        d = (~agrees[top]).sum() / len(problems)
        lost = (strong[top].sum() - weak[top].sum()) / len(problems)
        print(
            f"  {share:.0%} accepted: disagreeing {d:.1%} of requests (the bound allows {0.05 * 0.5:.1%} at A 0.5, "
            f"{0.05 * strong.mean():.1%} at the true A {strong.mean():.3f}); accuracy really lost {lost:.1%} "
            f"(λ {lost / d:.2f})"
        )


def auc_of(scores: np.ndarray, labels: np.ndarray) -> float:
    return auc(scores.tolist(), labels.tolist())


def estimate_held_out(problems: list[Problem], policy: Policy, seeds: int, name: str = "") -> None:
    """What a scorer trained on every problem would do on problems like them it never saw: the
    threshold its calibration starts from, applied to each problem's score by a model fitted
    without it (10 folds), counted as the replay counts (shadow calls aside)."""
    examples = training_examples(problems)
    start = QualityController(policy, train_scorer(examples).model.calibration).promised
    if start is None:
        print(f"  learned{name}: certifies no threshold")
        return
    m = Matrix.of(examples)
    broken = np.array([rule_violation(p.item) is not None for p in problems])
    weak = np.array([p.weak_right for p in problems])
    strong = np.array([p.strong_right for p in problems])
    weak_cost = np.array([float(p.weak_cost) for p in problems])
    strong_cost = np.array([float(p.strong_cost) for p in problems])
    ratios, costs, escalated, drawn_ratios, drawn_costs = [], [], [], [], []
    rng = np.random.default_rng(0)
    for seed in range(seeds):
        accepted = (out_of_fold(m, 10, 1.0, seed) >= start) & ~broken
        ratios.append(np.where(accepted, weak, strong).sum() / strong.sum())
        costs.append((weak_cost.sum() + strong_cost[~accepted].sum()) / strong_cost.sum())
        escalated.append(1 - accepted.mean())
        for _ in range(DRAWS):  # runs of as many problems like these: how far one run strays
            i = rng.integers(0, len(problems), len(problems))
            drawn_ratios.append(np.where(accepted[i], weak[i], strong[i]).sum() / strong[i].sum())
            drawn_costs.append((weak_cost[i].sum() + strong_cost[i][~accepted[i]].sum()) / strong_cost[i].sum())
    print(
        f"  learned{name}: starts at {start:.2f}; accuracy vs strong {statistics.mean(ratios):.1%} "
        f"({min(ratios):.1%}-{max(ratios):.1%}), cost vs strong {statistics.mean(costs):.1%} "
        f"({min(costs):.1%}-{max(costs):.1%}), escalated {statistics.mean(escalated):.1%}; "
        f"one run of {len(problems)} such problems (bootstrap): accuracy sd {np.std(drawn_ratios):.1%}, "
        f"below 95% in {np.mean(np.array(drawn_ratios) < 0.95):.0%} of draws; cost sd {np.std(drawn_costs):.1%}"
    )
