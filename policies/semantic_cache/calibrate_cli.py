"""`costgate cache calibrate FILE...`: re-fit the verifier on a team's own labelled pairs.

The shipped verifier is this command's output on the hand-adjudicated QQP candidates:

    costgate cache calibrate ../shared/data/qqp_dev_adjudicated.jsonl \\
        bench/data/qqp_dev_adjudicated_extra.jsonl --out policies/semantic_cache/verifier.npz

With `--team NAME [--config FILE]` it adds the pairs the team judged through POST /v1/feedback
(read from the gateway's database by the reader the gateway passes in) to the FILEs' labels —
by default those same two files' pairs, shipped in the package as base_labels.jsonl.gz (each
pair once) so an installed gateway has them — and guards each threshold with the team's own
pairs (team_calibration.py).
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path

from policies.semantic_cache.crossval import Calibration, calibrate, summarise
from policies.semantic_cache.team_calibration import FEW, TeamCalibration, calibrate_for_team
from policies.semantic_cache.verifier_calibration import Labelled

# The labels the shipped verifier was fitted on (the two files above, each pair once): `--team`'s default.
SHIPPED_LABELS = Path(__file__).with_name("base_labels.jsonl.gz")
# (config file or None, team name) -> the team's labelled pairs; raises ValueError or OSError
TeamReader = Callable[[str | None, str], list[Labelled]]
FORMATS = (
    '{"a", "b", "duplicate"} (a stored question, a query, whether one\'s answer answers the other) or '
    '{"query", "stored", "same"}'
)


def read_file(path: Path) -> list[Labelled]:
    """Labelled candidates from JSON lines in either of FORMATS."""
    out = []
    with gzip.open(path, "rt") if path.suffix == ".gz" else open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}:{n}: not JSON ({err.msg}); each line needs {FORMATS}") from None
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


def _base_files(args: argparse.Namespace) -> list[Path]:
    if args.files:
        return [Path(f) for f in args.files]
    if not args.team:
        raise ValueError("give the labelled pairs as FILE (or --team NAME to fit on a team's feedback)")
    return [SHIPPED_LABELS]


def _print_figures(result: Calibration) -> None:
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


def _print_team(team: str, result: TeamCalibration) -> None:
    print(
        f"team {team}: {result.team_pairs} labelled pairs from its feedback ({result.team_wrong} reported wrong), "
        f"{result.replaced} base labels replaced by the team's verdict"
    )
    if result.team_pairs < FEW:
        print(
            f"  only {result.team_pairs} pairs (fewer than {FEW}): they barely move the fit; what they change is "
            "each threshold, raised until the team's own reported hits are within the bound"
        )
    print("  max_false_hit_rate  threshold  team pairs served (wrong)")
    for rate, threshold in zip(result.verifier.rates.tolist(), result.verifier.thresholds.tolist()):
        served, wrong = result.team_served[rate]
        note = f"  raised from {result.raised[rate][0]:.4f} by the team's reports" if rate in result.raised else ""
        print(f"  {rate:17.3f}  {threshold:9.4f}  {served:5d} ({wrong}){note}")
    for rate in result.dropped:
        print(f"  {rate:17.3f}  dropped: the team's reports leave no threshold that serves within this bound")


def run_calibrate(args: argparse.Namespace, team_reader: TeamReader | None = None) -> int:
    from policies.semantic_cache.embedder import Embedder

    try:
        labelled = read_labelled(_base_files(args))
        if args.team:
            assert team_reader is not None
            team = team_reader(args.config, args.team)
            if not team:
                raise ValueError(
                    f"team {args.team!r} has no labelled pairs yet (semantic hits reported wrong or right through "
                    "POST /v1/feedback or the dashboard): nothing written, its verifier stands"
                )
            fitted = calibrate_for_team(labelled, team, Embedder().embed_many)
            result, verifier = fitted.calibration, fitted.verifier
        else:
            result = calibrate(labelled, Embedder().embed_many)
            verifier = result.verifier
    except (OSError, ValueError) as err:
        print(f"costgate cache calibrate: {err}", file=sys.stderr)
        return 2
    out = Path(args.out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        verifier.save(out)
    except OSError as err:
        print(f"costgate cache calibrate: cannot write {out}: {err.strerror or err}", file=sys.stderr)
        return 2
    _print_figures(result)
    if args.team:
        _print_team(args.team, fitted)
    if not len(verifier.rates):
        print("  no bound could be met with 95% confidence: only questions with the same words will be served")
    where = f"cache.teams.{args.team}.verifier" if args.team else "cache.verifier"
    print(f"wrote {out}; set {where}: {out} in the config to use it")
    return 0


def add_cache_commands(commands: argparse._SubParsersAction, team_reader: TeamReader | None = None) -> None:
    """The `cache` commands; `--team` is offered when the caller (the gateway) can read feedback."""
    cache = commands.add_parser("cache", help="response cache tools")
    sub = cache.add_subparsers(dest="cache_command", required=True)
    cal = sub.add_parser(
        "calibrate", help=f"re-fit the semantic cache's verifier on labelled pairs (JSON lines: {FORMATS})"
    )
    cal.add_argument("files", nargs="*" if team_reader else "+", metavar="FILE")
    cal.add_argument("--out", default="./costgate-data/verifier.npz", help="where to write the verifier")
    cal.set_defaults(team=None, config=None)
    if team_reader is not None:
        cal.add_argument(
            "--team",
            help="add the pairs this team judged through feedback to FILEs' (default: the shipped verifier's labels)",
        )
        cal.add_argument("--config", help="the gateway's config file, for its database (default: embedded defaults)")
    cal.set_defaults(run=partial(run_calibrate, team_reader=team_reader))
