"""A team's verdict on an answer the gateway served (POST /v1/feedback): pure data.

Verdicts feed two policies: the semantic cache (a verdict on a hit labels the pair of questions
it served, for `costgate cache calibrate --team`) and cascades (a verdict on a tier's answer
says how good that tier really was).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Verdict(enum.Enum):
    WRONG = "wrong"  # the answer did not answer the question
    RIGHT = "right"


@dataclass(frozen=True, slots=True)
class VerdictCount:
    """How many verdicts of one kind a group of answered requests got."""

    team_id: str
    requested_model: str | None  # what the client asked for: a model or a cascade's name
    served_model: str | None  # the model that answered (a cascade's tier; a hit's original model)
    cache_status: str  # miss | exact | semantic
    verdict: Verdict
    count: int
