"""Offline cascade simulator: the recorded GSM8K answers replayed, in order, through the real
quality controller and scorer objects (policies/quality_controller.py, policies/scorers/),
without HTTP, so a policy can be tuned and cross-validated in seconds.

For each of K folds: the learned scorer and its calibration are trained on the other folds
(`train_scorer`, as `costgate cascade train` does), then the fold's problems are replayed from
a fresh controller in several random orders, for the two configurations the issue names:
`rules` (the default scorer, no calibration) and `learned`. Every call is counted as the
gateway would charge it: the weak tier for each request that calls it, the strong tier for
each escalation, skip and shadow call, at the recorded problems' costs (bench/gsm8k_problems.py);
quality is accuracy against the recorded labels. The estimates from out-of-fold scores
(`--estimate`, and the agreement bound of `--learning`) are bench/cascade_estimate.py's.

Run: `python bench/cascade_offline.py [DATA] [--folds 3] [--orders 5] [--confidence 0.8] ...`
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cascade_estimate import agreement_bound, estimate_held_out  # noqa: E402
from bench.gsm8k_problems import DEFAULT_DATA, Problem, load, training_examples  # noqa: E402
from policies.precall import PrecallRouter, train_router  # noqa: E402
from policies.quality import Sample  # noqa: E402
from policies.quality_controller import Mode, Policy, QualityController  # noqa: E402
from policies.scorers import Scored  # noqa: E402
from policies.scorers.answer_features import features  # noqa: E402
from policies.scorers.rules import rule_violation  # noqa: E402
from policies.scorers.training import Matrix, out_of_fold, train_scorer  # noqa: E402
from policies.threshold_calibration import Calibration  # noqa: E402
from policies.whatif import Recorded  # noqa: E402
from policies.whatif import replay as learning_replay  # noqa: E402


@dataclass
class Run:
    n: int = 0
    correct: int = 0
    strong_correct: int = 0
    cost: Decimal = Decimal(0)
    strong_cost: Decimal = Decimal(0)
    escalated: int = 0  # answered by the strong tier (escalated or skipped to it)
    shadow_calls: int = 0
    cheap_calls: int = 0
    routed: int = 0  # sent straight to the strong tier by the router
    certified_at: int | None = None  # the request at which a threshold was first certified
    rejected_at: int | None = None  # the request at which the traffic first set the calibration aside
    final_mode: str = ""
    final_threshold: float | None = None

    @property
    def ratio(self) -> float:
        return self.correct / self.strong_correct

    @property
    def cost_ratio(self) -> float:
        return float(self.cost / self.strong_cost)


def replay(
    problems: Sequence[Problem],
    controller: QualityController,
    score: Callable[[Scored], float],
    rng: random.Random,
    router: PrecallRouter | None = None,
) -> Run:
    """Each problem once, in order, as the cascade in gateway/routing/cascade.py handles a request
    (with `router`: the router before the call, policies/precall.py, exploring as the gateway does)."""
    run = Run()
    for i, p in enumerate(problems):
        run.n += 1
        run.strong_cost += p.strong_cost
        run.strong_correct += p.strong_right
        if run.certified_at is None and controller.mode is Mode.CERTIFIED:
            run.certified_at = i
        if run.rejected_at is None and controller.rejected:
            run.rejected_at = i
        route = controller.route(rng)
        if not route.call_cheap:
            run.cost += p.strong_cost
            run.correct += p.strong_right
            run.escalated += 1
            continue
        if router is not None and controller.threshold is not None:
            if router.skips(features(p.item), float(p.weak_cost), float(p.strong_cost)):
                if rng.random() >= router.explore:
                    run.routed += 1
                    run.cost += p.strong_cost
                    run.correct += p.strong_right
                    run.escalated += 1
                    continue
        run.cheap_calls += 1
        run.cost += p.weak_cost
        confidence = 0.0 if rule_violation(p.item) else score(p.item)
        threshold = controller.threshold
        if threshold is not None and confidence >= threshold:
            run.correct += p.weak_right
            shadow = controller.shadow_probability()
            if shadow > 0 and rng.random() < shadow:
                run.shadow_calls += 1
                run.cost += p.strong_cost
                controller.add(Sample((confidence,), (p.agrees,), 1.0 / shadow))
            continue
        run.correct += p.strong_right
        run.escalated += 1
        run.cost += p.strong_cost
        controller.add(Sample((confidence,), (p.agrees,), route.weight))
    run.final_mode, run.final_threshold = controller.mode.value, controller.threshold
    return run


def router_for(model, train: Sequence[Problem], policy: Policy) -> PrecallRouter | None:
    """The router trained on the training folds, as the gateway's learner trains it on samples:
    each query labelled by whether the scorer (out of fold) accepts its cheap answer at the
    threshold the scorer's calibration starts from."""
    start = controller_for(policy, model.calibration).threshold
    if start is None:
        return None
    scores = out_of_fold(Matrix.of(training_examples(train)), 10, 1.0, 0)
    return train_router([features(p.item) for p in train], [s >= start for s in scores])


def learning_runs(problems: Sequence[Problem], policy: Policy, orders: int, router: bool) -> list:
    """The default cascade (`rules`, learning from nothing) over the problems, each once: in the
    file's order, then `orders - 1` random orders. Nothing is trained beforehand, so every answer
    it accepts was scored by a model fitted on earlier problems only: held out by construction."""
    rows = [Recorded(p.item, p.agrees, p.weak_cost, p.strong_cost, p.weak_right, p.strong_right) for p in problems]
    sequences = [rows] + [random.Random(o).sample(rows, len(rows)) for o in range(1, orders)]
    return [learning_replay(seq, policy, random.Random(o), router) for o, seq in enumerate(sequences)]


def summarize_learning(name: str, outs: list) -> None:
    acc = [o.accuracy_ratio for o in outs]
    cost_ = [o.cost_ratio for o in outs]
    certified = [o.certified_at for o in outs if o.certified_at is not None]
    print(f"\n{name}: {len(outs)} replays of {outs[0].requests} problems, learning from nothing")
    print(
        f"  accuracy vs strong: mean {statistics.mean(acc):.1%} min {min(acc):.1%}; cost vs strong: mean "
        f"{statistics.mean(cost_):.1%} min {min(cost_):.1%} max {max(cost_):.1%}; accepted "
        f"{statistics.mean(o.accepted / o.requests for o in outs):.1%}; routed "
        f"{statistics.mean(o.routed / o.requests for o in outs):.1%}; certified in {len(certified)} of {len(outs)}"
        + (f" (median request {statistics.median(certified):.0f})" if certified else "")
    )
    first = outs[0].curve
    marks = [c for c in first if c[0] in (20, 50, 100, 200, 300, 400, 500, 600, 650)]
    print("  learning curve (file order): " + "; ".join(f"{n}: cost {r:.1%} {m}" for n, r, _, m, _ in marks))


def controller_for(policy: Policy, calibration: Calibration | None) -> QualityController:
    return QualityController(policy, calibration)


def summarize(name: str, runs: list[Run]) -> None:
    ratios = [r.ratio for r in runs]
    costs = [r.cost_ratio for r in runs]
    certified = [r.certified_at for r in runs if r.certified_at is not None]
    print(f"\n{name}: {len(runs)} replays of {runs[0].n}-{runs[-1].n} problems")
    print(
        f"  accuracy vs strong: mean {statistics.mean(ratios):.1%}  min {min(ratios):.1%}  max {max(ratios):.1%}  "
        f"sd {statistics.pstdev(ratios):.1%}  below 95%: {sum(r < 0.95 for r in ratios)}/{len(runs)}"
    )
    print(
        f"  cost vs strong:     mean {statistics.mean(costs):.1%}  min {min(costs):.1%}  max {max(costs):.1%}  "
        f"sd {statistics.pstdev(costs):.1%}  above 60%: {sum(c > 0.60 for c in costs)}/{len(runs)}"
    )
    print(
        f"  escalated {statistics.mean(r.escalated / r.n for r in runs):.1%}  shadow calls "
        f"{statistics.mean(r.shadow_calls for r in runs):.1f}  cheap calls "
        f"{statistics.mean(r.cheap_calls / r.n for r in runs):.1%}  routed past the cheap tier "
        f"{statistics.mean(r.routed / r.n for r in runs):.1%}  certified at request "
        f"{'never' if not certified else f'{statistics.median(certified):.0f} (median of {len(certified)})'}"
    )
    rejected = [r.rejected_at for r in runs if r.rejected_at is not None]
    if rejected:
        print(f"  calibration set aside by the traffic in {len(rejected)} replays (first at request {min(rejected)})")
    modes = sorted({f"{r.final_mode} {r.final_threshold}" for r in runs})
    print(f"  final: {', '.join(modes[:8])}")


def folds_of(problems: list[Problem], folds: int, splits: int):
    """(split, fold, scorer trained on the other folds, held-out problems, the other folds' problems)
    for each fold of each split."""
    for split in range(splits):
        order = np.random.default_rng(split).permutation(len(problems))
        for k, held in enumerate(np.array_split(order, folds)):
            held_set = set(held.tolist())
            train = [problems[i] for i in order if i not in held_set]
            yield split, k, train_scorer(training_examples(train)).model, [problems[i] for i in held], train


def sequence_of(test: list[Problem], length: int, rng: random.Random) -> list[Problem]:
    """The held-out problems in a random order, reshuffled and repeated up to `length` requests."""
    passes = max(1, -(-length // len(test)))
    return [p for _ in range(passes) for p in rng.sample(test, len(test))][: max(length, len(test))]


def cross_validate(
    problems: list[Problem],
    policies: dict[str, Policy],
    folds: int,
    splits: int,
    orders: int,
    length: int,
    uncalibrated: bool = False,
    with_router: bool = False,
) -> dict[str, list[Run]]:
    """Replays of each held-out fold, from a fresh controller, for `rules` and for `learned`
    at each of `policies` (keyed by a label)."""
    runs: dict[str, list[Run]] = {}
    first = next(iter(policies.values()))
    for split, k, model, test, train in folds_of(problems, folds, splits):
        for o in range(orders):
            rng = random.Random(1000 * split + 100 * k + o)
            sequence = sequence_of(test, length, rng)
            seed = rng.random()
            runs.setdefault("rules", []).append(
                replay(sequence, controller_for(first, None), lambda item: 1.0, random.Random(seed))
            )
            for label, policy in policies.items():
                runs.setdefault(f"learned{label}", []).append(
                    replay(sequence, controller_for(policy, model.calibration), model.confidence, random.Random(seed))
                )
                if with_router:
                    router = router_for(model, train, policy)
                    runs.setdefault(f"learned{label} + router", []).append(
                        replay(
                            sequence,
                            controller_for(policy, model.calibration),
                            model.confidence,
                            random.Random(seed),
                            router,
                        )
                    )
            if uncalibrated:
                runs.setdefault("learned without its calibration", []).append(
                    replay(sequence, controller_for(first, None), model.confidence, random.Random(seed))
                )
    return runs


def fixed_thresholds(
    problems: list[Problem], thresholds: list[float], folds: int, splits: int
) -> dict[float, tuple[float, float]]:
    """Mean (cost vs strong, accuracy vs strong) of the learned scorer at fixed thresholds on
    held-out folds, with no shadow calls: the frontier the controller chooses a point on."""
    points: dict[float, list[Run]] = {t: [] for t in thresholds}
    for _, _, model, test, _ in folds_of(problems, folds, splits):
        for t in thresholds:
            policy = Policy(0.95, adaptive=False, fixed_threshold=t, shadow_rate=0.0)
            points[t].append(replay(test, controller_for(policy, None), model.confidence, random.Random(0)))
    return {
        t: (statistics.mean(r.cost_ratio for r in runs), statistics.mean(r.ratio for r in runs))
        for t, runs in points.items()
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    defaults = Policy(0.95)
    parser.add_argument("data", nargs="?", default=str(DEFAULT_DATA))
    parser.add_argument("--folds", type=int, default=3)
    parser.add_argument("--orders", type=int, default=5, help="random orders per held-out fold")
    parser.add_argument("--splits", type=int, default=1, help="independent fold splits")
    parser.add_argument(
        "--length",
        type=int,
        default=0,
        help="replay each held-out fold, reshuffled, until "
        "this many requests (0: once); 660 matches the held-out run's length",
    )
    parser.add_argument("--target", type=float, default=0.95)
    parser.add_argument(
        "--confidence", type=float, nargs="+", default=[defaults.confidence], help="one or more bound levels to compare"
    )
    parser.add_argument("--prior-weight", type=float, default=defaults.prior_weight)
    parser.add_argument("--shadow-rate", type=float, default=defaults.shadow_rate)
    parser.add_argument("--shadow-boost", type=float, default=defaults.shadow_boost)
    parser.add_argument("--min-samples", type=int, default=defaults.min_samples)
    parser.add_argument("--last-tier-quality", type=float, default=None)
    parser.add_argument(
        "--uncalibrated",
        action="store_true",
        help="also the learned scorer without its calibration: the controller learns from the traffic alone",
    )
    parser.add_argument(
        "--in-sample",
        action="store_true",
        help="also train on all and replay all (what bench/cascade.py measures with the bundled scorer)",
    )
    parser.add_argument(
        "--estimate",
        type=int,
        default=0,
        metavar="SEEDS",
        help="also estimate a held-out run of a scorer trained on all the data: its start threshold applied to "
        "10-fold out-of-fold scores, over SEEDS fold splits (before shadow calls)",
    )
    parser.add_argument("--router", action="store_true", help="also the learned scorer with the router before the call")
    parser.add_argument(
        "--learning",
        type=int,
        default=0,
        metavar="ORDERS",
        help="also the default cascade learning from nothing (rules; policies/whatif.py) over ORDERS orders",
    )
    args = parser.parse_args()
    problems = load(Path(args.data))
    policies = {
        (f" (confidence {c})" if len(args.confidence) > 1 else ""): Policy(
            args.target,
            c,
            min_samples=args.min_samples,
            shadow_rate=args.shadow_rate,
            shadow_boost=args.shadow_boost,
            prior_weight=args.prior_weight,
            last_tier_quality=args.last_tier_quality,
        )
        for c in args.confidence
    }
    runs = cross_validate(
        problems, policies, args.folds, args.splits, args.orders, args.length, args.uncalibrated, args.router
    )
    print(
        f"{len(problems)} problems, {args.splits} split(s) x {args.folds} folds x {args.orders} orders; "
        f"policy: {next(iter(policies.values()))}"
    )
    for name, found in runs.items():
        summarize(f"{name} (cross-validated)", found)
    if args.learning:
        agreement_bound(problems)
        for name, policy in policies.items():
            summarize_learning(f"default{name}", learning_runs(problems, policy, args.learning, router=True))
            if args.last_tier_quality is None:  # what the same cascade does when A is stated
                stated = Policy(policy.target, policy.confidence, last_tier_quality=0.85)
                summarize_learning(
                    f"default{name}, last_tier_quality 0.85", learning_runs(problems, stated, args.learning, True)
                )
    if args.estimate:
        print(
            f"\nheld-out estimate: a scorer trained on all {len(problems)} problems, from the threshold its "
            f"calibration starts at, on 10-fold out-of-fold scores over {args.estimate} splits (before shadow calls)"
        )
        for name, policy in policies.items():
            estimate_held_out(problems, policy, args.estimate, name)
    if args.in_sample:
        model = train_scorer(training_examples(problems)).model
        policy = next(iter(policies.values()))
        in_sample = [
            replay(problems, controller_for(policy, model.calibration), model.confidence, random.Random(o))
            for o in range(args.orders)
        ]
        summarize("learned, in-sample (trained and replayed on all)", in_sample)
    return 0


if __name__ == "__main__":
    sys.exit(main())
