"""The cost/accuracy plot of docs/benchmarks.md (issue 13): the learned scorer's frontier at
fixed thresholds and the controller's cross-validated replays (bench/cascade_offline.py), with
the runs bench/cascade.py measured through the gateway on top."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.cascade_offline import cross_validate, fixed_thresholds
from bench.gsm8k_problems import load
from policies.quality_controller import Policy

THRESHOLDS = [0.70, 0.75, 0.78, 0.80, 0.82, 0.84, 0.85, 0.86, 0.88, 0.90, 0.93, 0.96]


def plot(gateway_runs: list[tuple[Any, Any]], data: str, path: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed (pip install -e '.[bench]'): no plot")
        return
    problems = load(Path(data))
    frontier = fixed_thresholds(problems, THRESHOLDS, folds=5, splits=2)
    replays = cross_validate(problems, {"": Policy(0.95)}, folds=5, splits=2, orders=2, length=660)
    fig, ax = plt.subplots(figsize=(6.6, 4.4))
    xs, ys = zip(*(frontier[t] for t in THRESHOLDS))
    ax.plot(xs, ys, "-", color="grey", label="learned scorer, fixed thresholds (CV, no shadow calls)")
    for t in (0.80, 0.85, 0.90):
        ax.annotate(f"{t:.2f}", frontier[t], textcoords="offset points", xytext=(4, -10), fontsize=7)
    for name, marker in (("learned", "o"), ("rules", "s")):
        runs = replays[name]
        ax.scatter(
            [r.cost_ratio for r in runs],
            [r.ratio for r in runs],
            s=10,
            alpha=0.35,
            marker=marker,
            label=f"{name}: controller, CV replays of 660 requests (offline)",
        )
    for res, strong in gateway_runs:
        ax.plot(
            [float(res.cost / strong.cost)],
            [res.correct / strong.correct],
            "D" if "fold" in res.name else "*",
            markersize=7 if "fold" in res.name else 11,
            label=f"{res.name} (gateway)",
        )
    ax.axhline(0.95, color="black", linestyle=":", linewidth=0.8, label="95% of always-strong's accuracy")
    ax.axvline(0.60, color="black", linestyle="--", linewidth=0.8, label="40% cheaper than always-strong")
    ax.set_xlabel("cost relative to always-strong (every call, shadow calls included)")
    ax.set_ylabel("accuracy relative to always-strong")
    ax.set_title("GSM8K dev: cascades at quality_target 0.95 (issue 13)")
    ax.legend(fontsize=6, loc="lower right")
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    print(f"plot: {path}")
