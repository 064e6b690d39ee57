"""The learned scorer: logistic regressions on (query, answer) features, trained offline.

`costgate cascade train FILE` fits it from labelled examples (JSONL: the query, the cheap
tier's answer, whether that answer is acceptable and, when known, whether the last tier was
right) or from the shadow samples the gateway stored, and writes one JSON file the cascade
loads (`scorer: learned:PATH`; plain `learned` loads the file shipped with the package,
trained on the GSM8K development data). The file carries the scorer's calibration curve
(policies/threshold_calibration.py), so a cascade starts from a threshold measured for it.

The confidence is one minus the quality that accepting the answer is expected to lose:

    confidence = min(1, 1 - (P(last tier right | x) - P(cheap answer acceptable | x)))

since P(last right) - P(cheap right) is exactly the expected accuracy lost by accepting (it
equals P(cheap wrong, last right) - P(cheap right, last wrong)). Without last-tier labels the
last tier is taken to be right, and the confidence is P(acceptable). On the GSM8K dev data
(3-fold cross-validation, 12 splits, the cheapest threshold in hindsight; the answer-shape
features alone, before the query's topic was added) this ranking escalates 54% of
always-strong's cost to keep 96% of its accuracy, against 56% when ranking by P(cheap right)
alone; weighing the loss by each request's escalation cost gained nothing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from policies.scorers import Scored
from policies.scorers.answer_features import NAMES, features
from policies.threshold_calibration import Calibration

BUNDLED = Path(__file__).with_name("gsm8k_learned.json")
FORMAT_V1 = "costgate-learned-scorer/1"  # one model, confidence = P(acceptable)
FORMAT = "costgate-learned-scorer/2"


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
        """P(label | x), `x` a row of features.NAMES (or a longer one: the model reads its first
        `len(names)`, so a file trained before later features were added still scores)."""
        row = np.asarray(x, dtype=float)[: len(self.names)]
        z = float(((row - self.mean) / self.scale) @ self.weights) + self.bias
        return float(1.0 / (1.0 + np.exp(-np.clip(z, -50, 50))))

    def to_json(self) -> dict:
        return {
            "features": list(self.names),
            "mean": self.mean.tolist(),
            "scale": self.scale.tolist(),
            "weights": self.weights.tolist(),
            "bias": self.bias,
        }

    @classmethod
    def from_json(cls, data: dict) -> LogisticModel:
        names = tuple(data["features"])
        if names != NAMES[: len(names)]:  # the features it was trained on are no longer these
            raise ValueError("not a learned scorer for this version's features; retrain it")
        return cls(
            names,
            np.array(data["mean"]),
            np.array(data["scale"]),
            np.array(data["weights"]),
            float(data["bias"]),
        )

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps({"format": FORMAT_V1, **self.to_json()}, indent=1) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> LogisticModel:
        return LearnedModel.load(path).accept


@dataclass(frozen=True)
class LearnedModel:
    accept: LogisticModel  # P(the cheap answer is acceptable | features)
    last: LogisticModel | None = None  # P(the last tier is right | features); None: taken as 1
    calibration: Calibration | None = None

    def confidence(self, item: Scored) -> float:
        return self.confidence_of(features(item))

    def confidence_of(self, x: Sequence[float]) -> float:
        """The confidence of a feature vector (`features(item)`)."""
        p_accept = self.accept.probability(x)
        if self.last is None:
            return p_accept
        return min(1.0, 1.0 - (self.last.probability(x) - p_accept))

    def to_json(self) -> dict:
        return {
            "format": FORMAT,
            "accept": self.accept.to_json(),
            "last": None if self.last is None else self.last.to_json(),
            "calibration": None if self.calibration is None else self.calibration.to_json(),
        }

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_json(), indent=1) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> LearnedModel:
        data = json.loads(Path(path).read_text())
        try:
            if data.get("format") == FORMAT_V1:
                return cls(LogisticModel.from_json(data))
            if data.get("format") != FORMAT:
                raise ValueError(f"unknown format {data.get('format')!r}")
            last, calibration = data.get("last"), data.get("calibration")
            return cls(
                LogisticModel.from_json(data["accept"]),
                None if last is None else LogisticModel.from_json(last),
                None if calibration is None else Calibration.from_json(calibration),
            )
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"{path}: not a learned scorer costgate can load ({err}); retrain it") from None


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
    return LogisticModel(NAMES[: x.shape[1]], mean, scale, w[:-1], float(w[-1]))


def train(examples: Sequence[Example], l2: float = 1.0) -> LogisticModel:
    labels = {e.label for e in examples}
    if len(labels) < 2:
        raise ValueError("training needs both acceptable and unacceptable examples")
    x = np.array([features(e.item) for e in examples], dtype=float)
    y = np.array([1.0 if e.label else 0.0 for e in examples])
    return fit_logistic(x, y, l2)


def auc(scores: Sequence[float], labels: Sequence[bool]) -> float:
    """Area under the ROC curve (ties count half): how well scores rank good above bad."""
    s, y = np.asarray(scores, dtype=float), np.asarray(labels, dtype=bool)
    pos, neg = int(y.sum()), int((~y).sum())
    if not pos or not neg:
        raise ValueError("AUC needs both classes")
    order = np.argsort(s, kind="mergesort")
    ranks = np.empty(len(s))
    sorted_s = s[order]
    starts = np.r_[0, np.flatnonzero(np.diff(sorted_s)) + 1]
    ends = np.r_[starts[1:], len(s)]
    for a, b in zip(starts, ends):  # tied scores share their mean rank
        ranks[order[a:b]] = (a + b + 1) / 2
    return float((ranks[y].sum() - pos * (pos + 1) / 2) / (pos * neg))


class LearnedScorer:
    needs_logprobs = False

    def __init__(self, model: LearnedModel) -> None:
        self.model = model

    @classmethod
    def from_file(cls, path: str | Path | None = None) -> LearnedScorer:
        return cls(LearnedModel.load(path or BUNDLED))

    @property
    def calibration(self) -> Calibration | None:
        return self.model.calibration

    def score(self, item: Scored) -> float:
        return self.model.confidence(item)
