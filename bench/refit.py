"""What a cascade's refit costs (issue 13 item 4): the pure decision of policies/scorers/refit.py,
the part gateway/routing/scorer_candidates.py runs in a worker thread, timed on N stored samples.

Samples are the GSM8K dev problems' weak answers (../shared/data/gsm8k_dev.jsonl), repeated to
N rows: features of (problem, weak answer), `agrees` when its final number is the strong
answer's. Two cases, each timed `--repeat` times (median):

- replace: the current scorer ranks backwards (the bundled one with its weights negated, no
  calibration): the candidate wins and is refitted on every row with its 10-fold calibration;
- refuse: the current scorer is the one that replace fitted on these very rows: the candidate
  does not beat it on the held-back rows, and nothing more is fitted.

(Not timed here: rebuilding the controller on the rescored samples, which follows a replace.)

    .venv/bin/python bench/refit.py [gsm8k_dev.jsonl] [--samples 5000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from policies.scorers import Scored  # noqa: E402
from policies.scorers.answer_features import features, final_number  # noqa: E402
from policies.scorers.learned import BUNDLED, LearnedModel  # noqa: E402
from policies.scorers.refit import TrainingRow, refit  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "gsm8k_dev.jsonl"


def rows_from(path: Path, n: int) -> list[TrainingRow]:
    problems = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    rows = []
    for p in problems:
        weak, strong = final_number(p["weak_response"]), final_number(p["strong_response"])
        vector = tuple(features(Scored(p["prompt"], p["weak_response"])))
        rows.append(TrainingRow(vector, weak is not None and weak == strong, 1.0))
    return [rows[i % len(rows)] for i in range(n)]


def backwards(model: LearnedModel) -> LearnedModel:
    accept = replace(model.accept, weights=-model.accept.weights, bias=-model.accept.bias)
    return LearnedModel(accept, None, None)


def timed(rows: list[TrainingRow], current: LearnedModel, repeat: int) -> tuple[float, LearnedModel | None, str]:
    seconds, new, reason = [], None, ""
    for _ in range(repeat):
        started = time.perf_counter()
        new, verdict = refit(rows, current)
        seconds.append(time.perf_counter() - started)
        reason = verdict.reason
    return statistics.median(seconds), new, reason


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="?", type=Path, default=DATA)
    parser.add_argument("--samples", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rows = rows_from(args.data, args.samples)
    bundled = LearnedModel.load(BUNDLED)
    load = os.getloadavg()[0]
    print(f"{args.samples} samples, median of {args.repeat}, load average {load:.2f}, one thread")
    seconds, fitted, reason = timed(rows, backwards(bundled), args.repeat)
    print(f"  replace  {seconds:6.2f} s  replaced: {fitted is not None}  ({reason})")
    if fitted is not None:
        seconds, new, reason = timed(rows, fitted, args.repeat)
        print(f"  refuse   {seconds:6.2f} s  replaced: {new is not None}  ({reason})")


if __name__ == "__main__":
    main()
