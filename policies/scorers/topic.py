"""What a question is about, in a few numbers: its MiniLM vector on a fixed basis.

Some kinds of question are harder for a cheap model than others, and the answer's shape does
not show it: with the query's coordinates on these 12 axes among its features, the bundled
scorer keeps the same share of GPT-4's accuracy on the GSM8K dev data for ~2.4 points less of
always-strong's cost (`bench/cascade_offline.py --estimate 8`: 96.3% at 53.9% -> 96.4% at
51.5%; docs/benchmarks.md). The axes are the top principal components of 3,000 Quora questions
(`../shared/data/qqp_dev.jsonl`), not of the math problems themselves: a basis of what people
ask in general, so a cascade that learns from other traffic gets the same kind of numbers. In
exploratory cross-validation (not kept as a bench) a basis fitted on GSM8K's own questions did
no better, random axes nearly as well (the weights, not the axes, carry what is learned), and
the whole 384-d vector worse (too many weights for 659 problems).

The vector is the shipped MiniLM's (policies/semantic_cache/embedder.py), on the query's first
128 tokens. `python -m policies.scorers.topic QQP_JSONL` rebuilds `topic-basis.npz`.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

BASIS_FILE = Path(__file__).with_name("topic-basis.npz")
AXES = 12


@dataclass(frozen=True)
class TopicBasis:
    mean: np.ndarray  # (384,) float32: the mean question vector
    axes: np.ndarray  # (AXES, 384) float32: unit principal axes

    def coordinates(self, vector: np.ndarray | None) -> list[float]:
        """The vector's coordinates on the axes; an unknown vector sits at the mean (all zero)."""
        if vector is None:
            return [0.0] * len(self.axes)
        return (self.axes @ (np.asarray(vector, dtype=np.float32) - self.mean)).astype(float).tolist()

    @classmethod
    def fit(cls, vectors: np.ndarray, axes: int = AXES) -> TopicBasis:
        mean = vectors.mean(axis=0)
        _, _, vt = np.linalg.svd(vectors - mean, full_matrices=False)
        return cls(mean.astype(np.float32), vt[:axes].astype(np.float32))

    def save(self, path: Path = BASIS_FILE) -> None:
        np.savez(path, mean=self.mean, axes=self.axes)


@cache
def basis() -> TopicBasis:
    with np.load(BASIS_FILE) as data:
        return TopicBasis(data["mean"], data["axes"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pairs", type=Path, help="qqp_dev.jsonl: one {a, b, duplicate} object a line")
    parser.add_argument("--questions", type=int, default=3000, help="the first N pairs' `a` questions")
    parser.add_argument("--out", type=Path, default=BASIS_FILE)
    args = parser.parse_args()
    from policies.semantic_cache.embedder import Embedder

    lines = [line for line in args.pairs.read_text().splitlines() if line.strip()][: args.questions]
    vectors = Embedder().embed_many([json.loads(line)["a"] for line in lines])
    TopicBasis.fit(vectors).save(args.out)
    print(f"wrote {args.out}: {AXES} axes from {len(vectors)} questions")


if __name__ == "__main__":
    main()
