"""What if (policies/whatif.py): recorded traffic replayed through a new cascade without a call.
Its estimate from one recording must hold for a replay of fresh traffic of the same kind: the
replay's cost, agreement and accuracy fall inside the estimate's stated intervals."""

from __future__ import annotations

import random
from decimal import Decimal

import pytest

from policies.quality_controller import Policy
from policies.scorers import Scored
from policies.whatif import Recorded, estimate, replay

POLICY = Policy(0.95, last_tier_quality=1.0)


def recorded(rng: random.Random, n: int) -> list[Recorded]:
    """Worked answers (agree, right) and hedged guesses (disagree, wrong), a third of them guesses."""
    rows = []
    for _ in range(n):
        a, b = rng.randint(2, 99), rng.randint(2, 99)
        q = f"A box holds {a} rows of {b} pens. How many?"
        if rng.random() < 1 / 3:
            item, agrees = Scored(q, f"Maybe about {a * b + rng.randint(1, 9)}?"), False
        else:
            item, agrees = Scored(q, f"{a} * {b} = {a * b}.\n#### {a * b}"), True
        rows.append(Recorded(item, agrees, Decimal("0.0001"), Decimal("0.004"), agrees, True))
    return rows


@pytest.mark.slow  # takes seconds in process: out of the fast lane
def test_the_estimate_from_a_recording_bounds_a_replay_of_fresh_traffic() -> None:
    found = estimate(recorded(random.Random(1), 240), POLICY, draws=10, level=0.95)
    assert found.certified_share == 1.0  # the cascade learns and certifies in every draw
    assert found.cost_ratio.mean < 0.95  # it saves: the learning phase included
    for seed in range(2, 5):
        fresh = replay(recorded(random.Random(seed), 240), POLICY, random.Random(seed))
        assert found.cost_ratio.low <= fresh.cost_ratio <= found.cost_ratio.high, (seed, fresh.cost_ratio, found)
        assert found.agreement.low <= fresh.agreement <= found.agreement.high
        assert found.accuracy_ratio is not None and fresh.accuracy_ratio is not None
        assert found.accuracy_ratio.low <= fresh.accuracy_ratio <= found.accuracy_ratio.high


def test_a_replay_counts_every_call_and_learns_from_the_start() -> None:
    rows = recorded(random.Random(7), 200)
    out = replay(rows, POLICY, random.Random(7))
    assert out.requests == 200 and out.last_only == Decimal("0.004") * 200
    # every call paid: cheap calls, the last tier on every escalation and shadow sample
    escalated = out.requests - out.accepted - out.routed
    expected = Decimal("0.0001") * out.cheap_calls + Decimal("0.004") * (escalated + out.routed + out.shadow_calls)
    assert out.cost == expected
    assert out.certified_at is not None and out.certified_at < 100  # from tens of samples
    assert out.agreement >= 0.95
