"""A scorer's calibration: what every threshold would have done on labelled examples it never saw.

`costgate cascade train` scores each labelled example with a model fitted on the other folds
(cross-validation) and counts, for every candidate threshold, how many cheap answers it would
have accepted, how many of those disagreed with the last tier, and, when the examples say
whether each tier was right, how many of those lost quality (cheap answer wrong, last tier
right) or gained it (the reverse). Counts are kept, not ratios: the quality controller
(policies/quality.py) turns them into an estimate with a bound at the confidence a cascade is
configured for, and pools them with its own traffic's samples.

Without per-tier correctness labels an unacceptable cheap answer counts as a disagreement that
lost quality (the conservative reading), and the last tier's quality is unknown.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

CANDIDATES = tuple(i / 100 for i in range(101))
FORMAT = "costgate-calibration/1"


@dataclass(frozen=True, slots=True)
class Labelled:
    """One held-out example: the scorer's confidence and what the tiers did."""

    score: float
    agrees: bool  # the cheap answer agrees with the last tier's
    lost: bool  # accepting it loses quality: cheap wrong, last right
    gained: bool  # accepting it gains quality: cheap right, last wrong
    last_right: bool | None = None  # None: the example does not say


@dataclass(frozen=True, slots=True)
class CurvePoint:
    threshold: float
    accepted: int  # examples whose score reaches the threshold
    disagree: int  # ... and whose cheap answer disagrees with the last tier
    lost: int  # ... whose cheap answer is wrong where the last tier is right
    gained: int  # ... whose cheap answer is right where the last tier is wrong


@dataclass(frozen=True)
class Calibration:
    examples: int
    last_right: int | None  # examples the last tier got right; None: no last-tier labels
    points: tuple[CurvePoint, ...]  # one per candidate threshold, ascending

    @property
    def last_tier_quality(self) -> float | None:
        return None if self.last_right is None or not self.examples else self.last_right / self.examples

    def at(self, threshold: float) -> CurvePoint:
        """The point of the highest candidate at or below `threshold` (what that threshold accepts at least)."""
        index = bisect.bisect_right([p.threshold for p in self.points], threshold + 1e-9) - 1
        return self.points[max(0, index)]

    def columns(self, candidates: Sequence[float]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(accepted, disagree, lost, gained) counts at each candidate threshold, as arrays."""
        table = self._table
        index = np.maximum(0, np.searchsorted(table[:, 0], np.asarray(candidates) + 1e-9, side="right") - 1)
        return table[index, 1], table[index, 2], table[index, 3], table[index, 4]

    @cached_property
    def _table(self) -> np.ndarray:
        return np.array([[p.threshold, p.accepted, p.disagree, p.lost, p.gained] for p in self.points], dtype=float)

    def to_json(self) -> dict:
        return {
            "format": FORMAT,
            "examples": self.examples,
            "last_right": self.last_right,
            "points": [[p.threshold, p.accepted, p.disagree, p.lost, p.gained] for p in self.points],
        }

    @classmethod
    def from_json(cls, data: dict) -> Calibration:
        if data.get("format") != FORMAT:
            raise ValueError(f"not a calibration of this version ({data.get('format')!r})")
        points = tuple(CurvePoint(float(t), int(a), int(d), int(lo), int(g)) for t, a, d, lo, g in data["points"])
        return cls(int(data["examples"]), None if data["last_right"] is None else int(data["last_right"]), points)


def calibrate(examples: Sequence[Labelled], candidates: Sequence[float] = CANDIDATES) -> Calibration:
    """Count, for every candidate threshold, what accepting the examples that reach it would do."""
    if not examples:
        raise ValueError("a calibration needs examples")
    score = np.array([e.score for e in examples])
    columns = {
        name: np.array([getattr(e, name) for e in examples], dtype=bool) for name in ("agrees", "lost", "gained")
    }
    points = []
    for t in sorted(candidates):
        accepted = score >= t - 1e-12
        points.append(
            CurvePoint(
                t,
                int(accepted.sum()),
                int((accepted & ~columns["agrees"]).sum()),
                int((accepted & columns["lost"]).sum()),
                int((accepted & columns["gained"]).sum()),
            )
        )
    labelled = [e.last_right for e in examples]
    last_right = None if any(v is None for v in labelled) else sum(bool(v) for v in labelled)
    return Calibration(len(examples), last_right, tuple(points))


def labelled(score: float, agrees: bool, cheap_right: bool | None, last_right: bool | None) -> Labelled:
    """An example from what is known of it. With both tiers' correctness, losses and gains are
    exact. With only the cheap tier's correctness (or only agreement, passed as `agrees`), an
    unacceptable answer that disagrees with the last tier counts as a loss."""
    if cheap_right is not None and last_right is not None:
        return Labelled(score, agrees, cheap_right < last_right, cheap_right > last_right, last_right)
    acceptable = agrees if cheap_right is None else cheap_right
    return Labelled(score, agrees, not acceptable and not agrees, False, None)
