"""The cost router's decision: a model name (config `cost_router.name`) that answers with the best model
whose estimated cost fits the request's `x-costgate-max-cost-usd`.

"Best" is the config's `quality` rank (higher is better; ties go to the cheaper model).
The estimate is the request's worst case on that model (gateway/upstream/worst_case.py), with
`expected_output_tokens` standing in for an unset `max_tokens`. A model whose breaker is
open is not a candidate. Without the header the router picks the best model outright.
With the header and no model fitting, the request is refused with 402
`cost_limit_exceeded` before any upstream call.

Where it applies: only to the router's own model name. A request naming a model directly
gets that model; the header then only feeds the budget stage's checks, so a client that
names a model is never silently switched to another.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal


@dataclass(frozen=True, slots=True)
class Candidate:
    name: str
    quality: int
    estimated_cost: Decimal


def choose(candidates: Sequence[Candidate], max_cost: Decimal | None) -> Candidate | None:
    """The highest-quality candidate that fits (cheaper first among equals); None if none fits."""
    fitting = [c for c in candidates if max_cost is None or c.estimated_cost <= max_cost]
    if not fitting:
        return None
    return min(fitting, key=lambda c: (-c.quality, c.estimated_cost, c.name))
