"""`costgate cascade train FILE`: fit the learned scorer and write its JSON file.

FILE is JSONL of labelled examples, one object a line, with the query, a cheap tier's answer
and a label (true: acceptable without escalating). Field names are options, so a dataset
can be read as it comes (`--answer-field weak_response --label-field weak_correct`). With
`--from-db CONFIG` the examples are instead the shadow samples the gateway stored (label:
the tier agreed with the last tier). Prints the k-fold cross-validated AUC, so the file's
quality on unseen queries is known before it is deployed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

import numpy as np

from policies.scorers import Scored
from policies.scorers.features import features
from policies.scorers.learned import auc, fit_logistic


def read_examples(path: Path, query: str, answer: str, label: str) -> tuple[np.ndarray, np.ndarray]:
    rows, labels = [], []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        obj = json.loads(line)
        try:
            rows.append(features(Scored(query=str(obj[query]), answer=str(obj[answer]))))
            labels.append(1.0 if obj[label] else 0.0)
        except KeyError as err:
            raise SystemExit(f"{path}:{n}: missing field {err}") from None
    return np.array(rows, dtype=float), np.array(labels)


async def read_samples(config: str, cascade: str | None) -> tuple[np.ndarray, np.ndarray]:
    from gateway.settings import load_settings
    from gateway.storage.cascade_samples import SampleStore
    from gateway.storage.db import create_engine

    engine = create_engine(load_settings(config).database_url)
    try:
        store = SampleStore(engine)
        await store.create()
        rows = await store.training_rows(cascade)
    finally:
        await engine.dispose()
    return np.array([r[0] for r in rows], dtype=float), np.array([1.0 if r[1] else 0.0 for r in rows])


def cross_validated_auc(x: np.ndarray, y: np.ndarray, folds: int, l2: float, seed: int = 0) -> float:
    order = np.random.default_rng(seed).permutation(len(y))
    scores = np.zeros(len(y))
    for part in np.array_split(order, folds):
        train = np.setdiff1d(order, part)
        model = fit_logistic(x[train], y[train], l2)
        scores[part] = [model.probability(row) for row in x[part]]
    return auc(scores.tolist(), [bool(v) for v in y])


def run_train(args: argparse.Namespace) -> int:
    if args.from_db:
        x, y = asyncio.run(read_samples(args.from_db, args.cascade))
    else:
        if not args.file:
            raise SystemExit("give a FILE of labelled examples, or --from-db CONFIG")
        x, y = read_examples(Path(args.file), args.query_field, args.answer_field, args.label_field)
    if len(y) < 2 or y.min() == y.max():
        raise SystemExit(f"need both acceptable and unacceptable examples (got {len(y)}, {int(y.sum())} acceptable)")
    if args.folds > 1 and len(y) >= 2 * args.folds:
        print(f"cross-validated AUC ({args.folds} folds): {cross_validated_auc(x, y, args.folds, args.l2):.3f}")
    model = fit_logistic(x, y, args.l2)
    model.save(args.out)
    print(f"trained on {len(y)} examples ({int(y.sum())} acceptable); wrote {args.out}")
    return 0


def add_commands(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    cascade = commands.add_parser("cascade", help="cascade tools")
    sub = cascade.add_subparsers(dest="cascade_command", required=True)
    train = sub.add_parser("train", help="fit the learned scorer")
    train.add_argument("file", nargs="?", help="JSONL of labelled examples")
    train.add_argument("--out", default="learned-scorer.json", help="where to write the scorer")
    train.add_argument("--from-db", metavar="CONFIG", help="train on the shadow samples in CONFIG's database")
    train.add_argument("--cascade", help="with --from-db: only this cascade's samples")
    train.add_argument("--query-field", default="query")
    train.add_argument("--answer-field", default="answer")
    train.add_argument("--label-field", default="label")
    train.add_argument("--l2", type=float, default=1.0, help="L2 penalty")
    train.add_argument("--folds", type=int, default=5, help="folds of the reported cross-validation (1: none)")
    train.set_defaults(run=run_train)


