"""The verifier: does a stored question's answer answer this one?

Questions with the same words (up to case and punctuation) are served. Otherwise a candidate
below `min_cosine` is refused, and so is one the cheap checks refuse outright
(`pair_features.VETOES`: another number or unit, a negation on one side, a name where the other has
another word, swapped roles, other CJK characters). Else a logistic model over
`pair_features.NAMES` gives the probability that the stored answer answers the query, and the hit
is served only when it clears the threshold calibrated for the team's false-hit bound — the
share of served hits that are wrong, certified with 95% confidence on labelled candidates
(`verifier_calibration`). Thresholds for several bounds are calibrated at once, so a team can ask for
another bound without re-fitting; a bound between two calibrated ones takes the stricter.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import numpy as np

from policies.semantic_cache.differences import Parsed
from policies.semantic_cache.pair_features import FEATURE_MAX, NAMES, pair_features, same_words, vetoed

SHIPPED = Path(__file__).with_name("verifier.npz")
MAX_COSINE = 1.001  # of two unit float32 vectors, with room for rounding


@dataclass(frozen=True)
class Verifier:
    weights: np.ndarray  # one per pair_features.NAMES
    rates: np.ndarray  # calibrated false-hit-rate bounds, ascending
    thresholds: np.ndarray  # the probability threshold that meets each bound
    min_cosine: float  # candidates below it are not even scored: none cleared calibration
    vetoes: bool = True  # False only for baselines (a plain cosine threshold)
    # least_cosine_needed by bound: asked on every semantic lookup, the same for every pair
    _least: dict[float, float | None] = field(default_factory=dict, init=False, repr=False, compare=False)

    def probability(self, query: Parsed, candidate: Parsed, cosine: float) -> float:
        z = float(pair_features(query, candidate, cosine) @ self.weights)
        return 1.0 / (1.0 + math.exp(-max(min(z, 50.0), -50.0)))

    def threshold_for(self, max_false_hit_rate: float) -> float | None:
        """The threshold for the loosest calibrated bound that is still <= the one asked for;
        None when no calibrated bound is that strict (then only the same words are served)."""
        allowed = np.nonzero(self.rates <= max_false_hit_rate + 1e-12)[0]
        return None if len(allowed) == 0 else float(self.thresholds[allowed[-1]])

    def accepts(self, query: Parsed, candidate: Parsed, cosine: float, max_false_hit_rate: float) -> bool:
        if same_words(query, candidate):
            return True
        threshold = self.threshold_for(max_false_hit_rate)
        if threshold is None or cosine < self.min_cosine or (self.vetoes and vetoed(query, candidate)):
            return False
        return self.probability(query, candidate, cosine) >= threshold

    def cosine_needed(self, query: Parsed, candidate: Parsed, max_false_hit_rate: float) -> float | None:
        """The least MiniLM cosine at which `accepts` serves the pair (-1 for the same words:
        any); None when it refuses the pair at every cosine (no bound, a veto, or a probability
        under the threshold even at cosine 1), so the cache need not compute their cosine to
        refuse it. The probability rises with the cosine, so `accepts` is `cosine >= needed`."""
        if same_words(query, candidate):
            return -1.0
        threshold = self.threshold_for(max_false_hit_rate)
        if threshold is None or (self.vetoes and vetoed(query, candidate)):
            return None
        needed = self._cosine_for(threshold, float(pair_features(query, candidate, 0.0) @ self.weights))
        return None if needed > MAX_COSINE else needed

    def least_cosine_needed(self, max_false_hit_rate: float) -> float | None:
        """A lower bound of `cosine_needed` over every pair that is not the same words (each
        learned feature at its most favourable value); None when only the same words can be
        served."""
        if max_false_hit_rate not in self._least:
            self._least[max_false_hit_rate] = self._least_needed(max_false_hit_rate)
        return self._least[max_false_hit_rate]

    def _least_needed(self, max_false_hit_rate: float) -> float | None:
        threshold = self.threshold_for(max_false_hit_rate)
        if threshold is None:
            return None
        rest = self.weights * FEATURE_MAX
        rest[NAMES.index("cosine")] = 0.0
        needed = self._cosine_for(threshold, float(rest[rest > 0].sum() + self.weights[NAMES.index("bias")]))
        return None if needed > MAX_COSINE else needed

    def _cosine_for(self, threshold: float, logit_without_cosine: float) -> float:
        """The cosine at which the probability reaches `threshold`, never under `min_cosine`."""
        if threshold <= 0.0 or threshold >= 1.0:
            return self.min_cosine if threshold <= 0.0 else math.inf
        weight = float(self.weights[NAMES.index("cosine")])
        if weight <= 0:  # not a verifier the cache could trust; serve the threshold's floor only
            return self.min_cosine if 1.0 / (1.0 + math.exp(-logit_without_cosine)) >= threshold else math.inf
        return max(self.min_cosine, (math.log(threshold / (1.0 - threshold)) - logit_without_cosine) / weight)

    def save(self, path: Path) -> None:
        """Write the file whole or not at all (a gateway may be reading it: it reloads a
        verifier file that changes on disk), at `path` (numpy's `.npz` added when missing)."""
        path = Path(path)
        if path.suffix != ".npz":
            path = path.with_name(path.name + ".npz")
        partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
        with partial.open("wb") as f:
            self._write(f)
        os.replace(partial, path)

    def _write(self, f: BinaryIO) -> None:
        np.savez(
            f,
            weights=self.weights,
            rates=self.rates,
            thresholds=self.thresholds,
            min_cosine=np.array(self.min_cosine),
            vetoes=np.array(self.vetoes),
            names=np.array(NAMES),
        )

    @classmethod
    def load(cls, path: Path = SHIPPED) -> Verifier:
        with np.load(path) as data:
            if tuple(str(n) for n in data["names"]) != NAMES:
                raise ValueError(f"{path} was fitted on other features; re-run `costgate cache calibrate`")
            vetoes = bool(data["vetoes"]) if "vetoes" in data.files else True
            return cls(data["weights"], data["rates"], data["thresholds"], float(data["min_cosine"]), vetoes)

    @classmethod
    def plain_cosine(cls, threshold: float) -> Verifier:
        """The baseline a verifier must beat: serve whenever cosine >= threshold."""
        weights = np.zeros(len(NAMES))
        weights[NAMES.index("bias")], weights[NAMES.index("cosine")] = -1000.0 * threshold, 1000.0
        return cls(weights, np.array([0.0]), np.array([0.5]), threshold, vetoes=False)  # whatever bound is asked
