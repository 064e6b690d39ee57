"""The learning curves of docs/benchmarks.md (issue 27): a cascade configured with only
`quality_target: 0.95`, learning from nothing over the GSM8K dev problems in the file's order
(policies/whatif.py, the gateway's controller, early fits and router, offline), its cost and
accuracy against always-strong after each request; with the last tier's quality unknown (the
default) and stated (`last_tier_quality: 0.85`). Written as an SVG by the dashboard's own chart
code (no plotting library on the test machine).

Run: `python bench/cascade_learning_plot.py [DATA] --out docs/cascade_learning_curve.svg`
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cascade_offline import learning_runs  # noqa: E402
from bench.gsm8k_problems import DEFAULT_DATA, load  # noqa: E402
from gateway.dashboard.charts import curve_lines  # noqa: E402
from policies.quality_controller import Policy  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="?", default=str(DEFAULT_DATA))
    parser.add_argument("--out", default="docs/cascade_learning_curve.svg")
    args = parser.parse_args()
    problems = load(Path(args.data))
    default = learning_runs(problems, Policy(0.95), 1, router=True)[0]
    stated = learning_runs(problems, Policy(0.95, last_tier_quality=0.85), 1, router=True)[0]
    points = [(float(a[0]), (a[1], a[4], b[1], b[4])) for a, b in zip(default.curve, stated.curve)]
    names = ("cost, A unknown", "accuracy, A unknown", "cost, A stated 0.85", "accuracy, A stated 0.85")
    svg = curve_lines(points, names, width=720, height=220)
    Path(args.out).write_text(svg + "\n")
    for label, out in (("A unknown", default), ("A stated 0.85", stated)):
        print(
            f"{label}: cost {out.cost_ratio:.1%} of always-strong, accuracy {out.accuracy_ratio:.1%}, "
            f"certified at request {out.certified_at}, accepted {out.accepted}, routed {out.routed}"
        )
    print(f"curve: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
