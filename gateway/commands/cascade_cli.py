"""`costgate cascade train FILE`: fit the learned scorer, calibrate it, write its JSON file.

FILE is JSONL of labelled examples, one object a line, with the query, a cheap tier's answer
and a label (true: acceptable without escalating). Field names are options, so a dataset
can be read as it comes (`--answer-field weak_response --label-field weak_correct`). Give the
last tier's correctness (`--last-label-field strong_correct`) and answer
(`--last-answer-field strong_response`) when you have them: the scorer then ranks answers by
the quality accepting them is expected to lose, and its calibration knows how much quality a
disagreement costs, which makes the cascade's bound far tighter (docs/cascades.md).

With `--from-db CONFIG` the examples are instead the shadow samples the gateway stored (label:
the tier agreed with the last tier). Prints the cross-validated AUC and the calibration curve
(threshold -> estimated share of the last tier's quality kept, its lower bound, escalation),
and the threshold a cascade at `--target` starts from.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import yaml

from policies.agreement import answers_agree
from policies.quality import TrafficCurve, bounds, last_tier_quality
from policies.quality_controller import Policy, QualityController
from policies.scorers import Scored
from policies.scorers.learned import LearnedModel
from policies.scorers.training import Matrix, TrainingExample, train_matrix

PREFIX = "costgate cascade train: "  # every refusal is this one line, then exit 1


def read_examples(path: Path, args: argparse.Namespace) -> Matrix:
    examples = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as err:
            raise SystemExit(f"{PREFIX}{path}:{n}: not JSON ({err.msg})") from None
        if not isinstance(obj, dict):
            raise SystemExit(f"{PREFIX}{path}:{n}: not a JSON object")
        try:
            answer = str(obj[args.answer_field])
            agrees = None if not args.last_answer_field else answers_agree(answer, str(obj[args.last_answer_field]))
            last = None if not args.last_label_field else bool(obj[args.last_label_field])
            examples.append(
                TrainingExample(Scored(str(obj[args.query_field]), answer), bool(obj[args.label_field]), last, agrees)
            )
        except KeyError as err:
            raise SystemExit(f"{PREFIX}{path}:{n}: missing field {err}") from None
    return Matrix.of(with_query_vectors(examples))


def with_query_vectors(examples: list[TrainingExample]) -> list[TrainingExample]:
    """The examples with their queries' MiniLM vectors, which the features read for the topic."""
    from policies.semantic_cache.embedder import Embedder  # onnxruntime: only to train

    if not examples:
        return []
    vectors = Embedder().embed_many([e.item.query for e in examples])
    return [replace(e, item=replace(e.item, query_vector=v)) for e, v in zip(examples, vectors)]


async def read_samples(config: str, cascade: str | None) -> Matrix:
    from gateway.config.settings import load_settings
    from gateway.storage.cascade_samples import SampleStore
    from gateway.storage.db import create_engine

    try:
        settings = load_settings(config)
    except (OSError, yaml.YAMLError, ValueError) as err:
        raise SystemExit(f"{PREFIX}config {config}: {' '.join(str(err).split())}") from None
    engine = create_engine(settings.database_url)
    try:
        store = SampleStore(engine)
        await store.create()
        rows = await store.training_rows(cascade)
    finally:
        await engine.dispose()
    if not rows:
        which = f"cascade {cascade!r}" if cascade else "any cascade"
        raise SystemExit(
            f"{PREFIX}no stored samples of {which} in {config}'s database: a cascade stores them as it "
            "escalates and shadow-samples (docs/cascades.md)"
        )
    agrees = np.array([r.agrees for r in rows], dtype=bool)
    return Matrix(np.array([r.features for r in rows], dtype=float).reshape(len(rows), -1), agrees, agrees, None)


def print_curve(model: LearnedModel, target: float, confidence: float) -> None:
    cal = model.calibration
    if cal is None:
        return
    policy = Policy(target, confidence)  # as a cascade configured with these runs it
    last = last_tier_quality(None, cal)
    found = bounds(
        TrafficCurve.empty(len(cal.points)),
        cal,
        last,
        confidence,
        policy.prior_weight,
        [p.threshold for p in cal.points],
    )
    start = QualityController(policy, cal).promised
    print(
        f"calibration ({cal.examples} held-out scores; last tier's quality {last.value:.3f} from {last.source}; "
        f"bounds at {confidence:.0%} one-sided):"
    )
    print(f"{'threshold':>10}{'quality kept':>14}{'lower bound':>13}{'escalated':>11}")
    for b in (found.at(i) for i in range(len(found.threshold))):
        if round(b.threshold * 100) % 5 == 0 or b.threshold == start:
            mark = f"  <- start at quality_target {target:.2f}" if b.threshold == start else ""
            print(f"{b.threshold:>10.2f}{b.ratio:>14.1%}{b.lower:>13.1%}{1 - b.accepted:>11.1%}{mark}")
    if start is None:
        print(
            f"no threshold keeps {target:.0%} of the last tier's quality on this calibration: "
            f"a cascade with this scorer starts by escalating every request"
        )


def run_train(args: argparse.Namespace) -> int:
    if args.from_db:
        m = asyncio.run(read_samples(args.from_db, args.cascade))
    else:
        if not args.file:
            raise SystemExit(f"{PREFIX}give a FILE of labelled examples, or --from-db CONFIG")
        try:
            m = read_examples(Path(args.file), args)
        except (OSError, UnicodeDecodeError) as err:
            raise SystemExit(f"{PREFIX}{args.file}: {getattr(err, 'strerror', None) or err}") from None
    try:
        trained = train_matrix(m, folds=args.folds, l2=args.l2)
    except ValueError as err:
        raise SystemExit(f"{PREFIX}{err}") from None
    if trained.auc is not None:
        print(f"cross-validated AUC ({args.folds} folds): {trained.auc:.3f}")
    try:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)  # as `cache calibrate --out` does
        trained.model.save(args.out)
    except OSError as err:
        raise SystemExit(f"{PREFIX}cannot write {args.out}: {err.strerror or err}") from None
    print_curve(trained.model, args.target, args.confidence)
    print(f"trained on {len(m)} examples ({int(m.acceptable.sum())} acceptable); wrote {args.out}")
    return 0


def add_commands(commands: argparse._SubParsersAction) -> None:
    cascade = commands.add_parser("cascade", help="cascade tools")
    sub = cascade.add_subparsers(dest="cascade_command", required=True)
    train = sub.add_parser("train", help="fit and calibrate the learned scorer")
    train.add_argument("file", nargs="?", help="JSONL of labelled examples")
    train.add_argument("--out", default="learned-scorer.json", help="where to write the scorer")
    train.add_argument("--from-db", metavar="CONFIG", help="train on the shadow samples in CONFIG's database")
    train.add_argument("--cascade", help="with --from-db: only this cascade's samples")
    train.add_argument("--query-field", default="query")
    train.add_argument("--answer-field", default="answer")
    train.add_argument("--label-field", default="label", help="true when the cheap answer is acceptable")
    train.add_argument("--last-label-field", help="true when the last tier's answer is right")
    train.add_argument("--last-answer-field", help="the last tier's answer (for agreement)")
    train.add_argument("--l2", type=float, default=1.0, help="L2 penalty")
    train.add_argument("--folds", type=int, default=10, help="cross-validation folds of the calibration (1: none)")
    train.add_argument("--target", type=float, default=0.95, help="the quality_target the printed start is for")
    train.add_argument("--confidence", type=float, default=0.7, help="the bound's one-sided level, as configured")
    train.set_defaults(run=run_train)
