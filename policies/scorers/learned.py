"""The learned scorer: logistic regression on (query, answer) features, trained offline.

`costgate cascade train FILE` fits it from labelled examples (JSONL: `query`, `answer`,
`label` — true when the answer is acceptable, e.g. correct or in agreement with the strong
model) or from the shadow samples the gateway stored, and writes a small JSON file the
cascade loads (`scorer: learned:PATH`; plain `learned` loads the file shipped with the
package, trained on the GSM8K development data).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from policies.scorers import Scored
from policies.scorers.features import NAMES, features

BUNDLED = Path(__file__).with_name("gsm8k_learned.json")
FORMAT = "costgate-learned-scorer/1"


@dataclass(frozen=True, slots=True)
class Example:
    item: Scored
    label: bool


@dataclass(frozen=True)
class LogisticModel:
    names: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray
    bias: float

    def probability(self, x: Sequence[float]) -> float:
        z = float(((np.asarray(x, dtype=float) - self.mean) / self.scale) @ self.weights) + self.bias
        return float(1.0 / (1.0 + np.exp(-np.clip(z, -50, 50))))

    def to_json(self) -> dict:
        return {"format": FORMAT, "features": list(self.names), "mean": self.mean.tolist(),
                "scale": self.scale.tolist(), "weights": self.weights.tolist(), "bias": self.bias}

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_json(), indent=1) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> LogisticModel:
        data = json.loads(Path(path).read_text())
        if data.get("format") != FORMAT or tuple(data["features"]) != NAMES:
            raise ValueError(f"{path}: not a learned scorer for this version's features; retrain it")
        return cls(tuple(data["features"]), np.array(data["mean"]), np.array(data["scale"]),
                   np.array(data["weights"]), float(data["bias"]))


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = 1.0, iterations: int = 50) -> LogisticModel:
    """L2-regularized logistic regression by Newton's method on standardized features."""
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale < 1e-9] = 1.0
    z = np.hstack([(x - mean) / scale, np.ones((len(x), 1))])
    w = np.zeros(z.shape[1])
    penalty = np.full(z.shape[1], l2)
    penalty[-1] = 0.0  # the bias is not shrunk
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-np.clip(z @ w, -50, 50)))
        grad = z.T @ (p - y) + penalty * w
        hessian = (z * (p * (1 - p))[:, None]).T @ z + np.diag(penalty) + 1e-9 * np.eye(len(w))
        step = np.linalg.solve(hessian, grad)
        w -= step
        if np.max(np.abs(step)) < 1e-8:
            break
    return LogisticModel(NAMES, mean, scale, w[:-1], float(w[-1]))


def train(examples: Sequence[Example], l2: float = 1.0) -> LogisticModel:
    labels = {e.label for e in examples}
    if len(labels) < 2:
        raise ValueError("training needs both acceptable and unacceptable examples")
    x = np.array([features(e.item) for e in examples], dtype=float)
    y = np.array([1.0 if e.label else 0.0 for e in examples])
    return fit_logistic(x, y, l2)


def auc(scores: Sequence[float], labels: Sequence[bool]) -> float:
    """Area under the ROC curve (ties count half): how well scores rank good above bad."""
    pos = [s for s, y in zip(scores, labels) if y]
    neg = [s for s, y in zip(scores, labels) if not y]
    if not pos or not neg:
        raise ValueError("AUC needs both classes")
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


class LearnedScorer:
    needs_logprobs = False

    def __init__(self, model: LogisticModel) -> None:
        self.model = model

    @classmethod
    def from_file(cls, path: str | Path | None = None) -> LearnedScorer:
        return cls(LogisticModel.load(path or BUNDLED))

    def score(self, item: Scored) -> float:
        return self.model.probability(features(item))

