"""`costgate cache calibrate FILE...`: re-fit the verifier on a team's own labelled pairs.

The shipped verifier is this command's output on the hand-adjudicated QQP candidates:

    costgate cache calibrate ../shared/data/qqp_dev_adjudicated.jsonl \\
        bench/data/qqp_dev_adjudicated_extra.jsonl --out policies/semantic_cache/verifier.npz
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from policies.semantic_cache.calibration import Labelled
from policies.semantic_cache.crossval import calibrate, summarise

FORMATS = (
    '{"a", "b", "duplicate"} (a stored question, a query, whether one\'s answer answers the other) or '
    '{"query", "stored", "same"}'
)


def read_file(path: Path) -> list[Labelled]:
    """Labelled candidates from JSON lines in either of FORMATS."""
    out = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            row = json.loads(line)
            if not isinstance(row, dict):
                raise ValueError(f"{path}:{n}: each line needs {FORMATS}")
            query, stored, same = (
                (row.get("query"), row.get("stored"), row.get("same"))
                if "query" in row
                else (row.get("b"), row.get("a"), row.get("duplicate"))
            )
            if not isinstance(query, str) or not isinstance(stored, str) or not isinstance(same, bool):
                raise ValueError(f"{path}:{n}: each line needs {FORMATS}")
            out.append(Labelled(query, stored, same))
    return out


def read_labelled(paths: list[Path]) -> list[Labelled]:
    """Every labelled (query, stored) pair of the files once: a pair judged twice the same way
    counts once; judged both ways, it is an error."""
    verdicts: dict[tuple[str, str], Labelled] = {}
    for path in paths:
        for c in read_file(path):
            if verdicts.setdefault((c.query, c.stored), c).same != c.same:
                raise ValueError(f"{path}: ({c.query!r}, {c.stored!r}) is labelled both ways")
    return list(verdicts.values())


def run_calibrate(args: argparse.Namespace) -> int:
    from policies.semantic_cache.embedder import Embedder

    try:
        labelled = read_labelled([Path(f) for f in args.files])
        result = calibrate(labelled, Embedder().embed_many)
    except (OSError, ValueError) as err:
        print(f"costgate cache calibrate: {err}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    result.verifier.save(out)
    print(
        f"fitted on {result.candidates} labelled pairs; thresholds chosen on scores from models that had not "
        f"seen them. Held-out figures: each fifth of the queries served by a verifier fitted on the rest."
    )
    print("  max_false_hit_rate  threshold  hits right (lowest-highest fifth)  served (lowest-highest fifth)")
    for rate, threshold in zip(result.verifier.rates, result.verifier.thresholds):
        s = summarise(result.folds, float(rate))
        print(
            f"  {rate:17.3f}  {threshold:9.4f}  {s.precision:6.1%} ({s.precision_range[0]:.1%}-"
            f"{s.precision_range[1]:.1%})  {s.served:18.1%} ({s.served_range[0]:.1%}-{s.served_range[1]:.1%})"
        )
    if not len(result.verifier.rates):
        print("  no bound could be met with 95% confidence: only questions with the same words will be served")
    print(f"wrote {out}; set cache.verifier: {out} in the config to use it")
    return 0


def add_cache_commands(commands: argparse._SubParsersAction) -> None:
    cache = commands.add_parser("cache", help="response cache tools")
    sub = cache.add_subparsers(dest="cache_command", required=True)
    cal = sub.add_parser(
        "calibrate", help=f"re-fit the semantic cache's verifier on labelled pairs (JSON lines: {FORMATS})"
    )
    cal.add_argument("files", nargs="+", metavar="FILE")
    cal.add_argument("--out", default="./costgate-data/verifier.npz", help="where to write the verifier")
    cal.set_defaults(run=run_calibrate)
