"""`costgate cache calibrate FILE`: re-fit the verifier on a team's own labelled pairs."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from policies.semantic_cache.calibration import Pair, calibrate, split


def read_pairs(path: Path) -> list[Pair]:
    pairs = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            row = json.loads(line)
            if not isinstance(row.get("a"), str) or not isinstance(row.get("b"), str) \
                    or not isinstance(row.get("duplicate"), bool):
                raise ValueError(f"{path}:{n}: each line needs \"a\", \"b\" (strings) and \"duplicate\" (true/false)")
            pairs.append(Pair(row["a"], row["b"], row["duplicate"]))
    return pairs


def run_calibrate(args: argparse.Namespace) -> int:
    from policies.semantic_cache.embedder import Embedder

    try:
        pairs = read_pairs(Path(args.file))
    except (OSError, ValueError) as err:
        print(f"costgate cache calibrate: {err}", file=sys.stderr)
        return 2
    embedder = Embedder()

    def embed(texts: list[str]):  # type: ignore[no-untyped-def]
        import numpy as np
        return np.concatenate([embedder.embed_many(texts[i:i + 64]) for i in range(0, len(texts), 64)]) \
            if texts else embedder.embed_many([])

    try:
        result = calibrate(pairs, embed)
    except ValueError as err:
        print(f"costgate cache calibrate: {err}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    result.verifier.save(out)
    parts = split(pairs)
    print(f"fitted on {result.train_pairs} pairs, thresholds chosen on {result.calibration_pairs}; "
          f"{len(parts['heldout'])} held out (not used)")
    for rate, threshold in zip(result.verifier.rates, result.verifier.thresholds):
        print(f"  max_false_hit_rate {rate:.3f}: threshold {threshold:.4f}")
    if not len(result.verifier.rates):
        print("  no bound could be met with 95% confidence: only same-text questions will be served")
    print(f"wrote {out}; set cache.verifier: {out} in the config to use it")
    return 0


def add_cache_commands(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    cache = commands.add_parser("cache", help="response cache tools")
    sub = cache.add_subparsers(dest="cache_command", required=True)
    cal = sub.add_parser("calibrate", help="re-fit the semantic cache's verifier on labelled pairs (JSON lines: "
                                           "{\"a\", \"b\", \"duplicate\"})")
    cal.add_argument("file")
    cal.add_argument("--out", default="./costgate-data/verifier.npz", help="where to write the verifier")
    cal.set_defaults(run=run_calibrate)
