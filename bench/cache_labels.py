"""Where the semantic cache benchmarks find their hand-adjudicated labels, and reading them.

The first file judges the candidate hits of the first 2,000 dev pairs (../shared/data/README.md
gives the rule); the second, when present, extends it by the same rule over the rest of the dev
pairs.
"""

from __future__ import annotations

from pathlib import Path

from policies.semantic_cache.calibrate_cli import read_labelled as read_files
from policies.semantic_cache.verifier_calibration import Labelled

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data"
DEFAULT_PAIRS = DATA / "qqp_dev.jsonl"
DEFAULT_LABELS = (DATA / "qqp_dev_adjudicated.jsonl", ROOT / "bench" / "data" / "qqp_dev_adjudicated_extra.jsonl")


def read_labelled(paths: list[Path]) -> list[Labelled]:
    if not paths:
        raise SystemExit(f"no adjudicated labels: pass their paths (default: {DEFAULT_LABELS[0]})")
    return read_files(paths)
