"""A cascade's learning reads the teams' verdicts on its last tier (gateway/routing/learning.py):
they set the last tier's quality at start and at each update, each team weighed by its share of
the last tier's answers."""

from __future__ import annotations

from pathlib import Path

import pytest

from policies.answer_verdict import Verdict, VerdictCount
from policies.scorers.rules import RuleScorer
from tests.gateway.routing.learning_support import NAME, FakeFeedback, FakeSamples, learning, stored


def counts(right: int, wrong: int) -> list[VerdictCount]:
    mine = [
        VerdictCount("team_a1", NAME, "best", "miss", Verdict.RIGHT, right),
        VerdictCount("team_a1", NAME, "best", "miss", Verdict.WRONG, wrong),
    ]
    others = [  # not the last tier's fresh answers to this cascade: left out
        VerdictCount("team_a1", NAME, "cheap", "miss", Verdict.WRONG, 100),
        VerdictCount("team_a1", NAME, "best", "exact", Verdict.WRONG, 100),
        VerdictCount("team_a1", "other-cascade", "best", "miss", Verdict.WRONG, 100),
    ]
    return mine + others


async def test_verdicts_on_the_last_tier_set_its_quality_at_start_and_at_each_update(tmp_path: Path) -> None:
    feedback = FakeFeedback(counts(27, 9))
    learn = learning(tmp_path, FakeSamples(stored(5)), feedback, current=RuleScorer())
    learn.upgrades = False  # only the verdicts are read at an update
    await learn.load()
    controller = learn.controller
    assert controller.last.value == 27 / 36 and controller.last.source == "feedback"
    assert controller.last.value < 0.76  # 27/36 = 0.75, not the default
    feedback.counts_list = counts(35, 5)
    assert await learn.update() is None  # neither refitted nor upgraded
    assert controller.last.value == 35 / 40


async def test_one_team_moves_the_last_tiers_quality_no_further_than_its_share_of_the_traffic(
    tmp_path: Path,
) -> None:
    """Issue 24, item 6: 45 `wrong` verdicts of one team moved a cascade's A from 0.5 to 0.0 for
    every team. Weighed by its share of the last tier's answers (half here), it moves A by half."""
    feedback = FakeFeedback([VerdictCount("team_h", NAME, "best", "miss", Verdict.WRONG, 45)])
    feedback.answered[(NAME, "best")] = {"team_h": 45, "team_o": 45}
    learn = learning(tmp_path, FakeSamples(stored(5)), feedback, current=RuleScorer())
    learn.upgrades = False
    await learn.load()
    last = learn.controller.last
    assert last.source == "feedback" and last.value == pytest.approx(0.25)  # 0.5 x 0 + 0.5 x 0.5 (the default)
    # the other team's verdicts count as much as its traffic: 10 `right`s out of its 45 answers
    feedback.counts_list.append(VerdictCount("team_o", NAME, "best", "miss", Verdict.RIGHT, 10))
    await learn.update()
    assert learn.controller.last.value == pytest.approx(0.5)  # 0.5 x 0 + 0.5 x 1
