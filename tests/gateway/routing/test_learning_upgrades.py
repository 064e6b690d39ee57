"""A rules cascade's learning upgrades it to a learned scorer (gateway/routing/learning.py, its
fits in gateway/routing/scorer_candidates.py): early fits from its first tens of samples, each
time half as many again, holding it learning while one may certify; then the held-back upgrade,
whose winner is kept and loaded back at the next start."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from gateway.config.settings import CascadeConfig
from gateway.routing import scorer_candidates
from gateway.routing.cascade import initial_state
from gateway.routing.cascade_metrics import PolicyMetrics
from gateway.routing.cascade_services import Services, StateSlot
from gateway.routing.confidence import PureConfidence
from gateway.routing.learning import UPGRADED, learning_for
from policies.quality import Sample
from policies.quality_controller import QualityController
from policies.scorers.fit_schedule import EARLY_ROWS
from policies.scorers.refit import TrainingRow, Upgrade, controller_for
from policies.scorers.rules import RuleScorer
from tests.gateway.routing.learning_support import (
    NAME,
    VECTOR,
    FakeSamples,
    Gated,
    learning,
    model,
    scorer_model,
    stored,
    verdict,
)


async def test_a_rules_cascade_is_upgraded_and_the_learned_scorer_kept_and_loaded_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    samples = FakeSamples(stored(30))
    learn = learning(tmp_path, samples, scorer="rules", current=RuleScorer())
    assert learn.upgrades and learn.model is None and learn.scorer_in_use == "rules"
    new = model(1.5)

    def fake_upgrade(rows: Sequence[TrainingRow], samples_: Sequence[Any], policy: Any, *_: Any) -> Upgrade:
        controller: QualityController = controller_for(new, policy, samples_)
        return Upgrade(new, controller, verdict(True))

    monkeypatch.setattr(scorer_candidates, "upgrade", fake_upgrade)
    learn.schedule.seen = EARLY_ROWS  # past the early fits (first_fit): the held-back upgrade
    attempt = await learn.update()
    assert attempt is not None and learn.upgraded and learn.model is new
    assert scorer_model(learn) is new and learn.scorer_in_use == UPGRADED
    saved = json.loads((tmp_path / "cascades" / "team_cascade.learned.json").read_text())
    assert saved["refit_of"] == "rules"
    again = learning(tmp_path, samples, scorer="rules", current=RuleScorer())
    await again.load()
    assert again.upgraded and scorer_model(again).to_json() == new.to_json()
    assert len(again.controller.samples) == 30


async def test_a_rules_cascade_fits_early_and_often_and_is_held_learning_while_a_fit_may_certify(
    tmp_path: Path,
) -> None:
    config = CascadeConfig(name=NAME, tiers=["cheap", "best"], refit_every=200, max_samples=1000)
    rules = PureConfidence(RuleScorer())
    services = Services(None, None, None, PolicyMetrics(CollectorRegistry()), FakeSamples([]))  # type: ignore[arg-type]
    c = learn = learning_for(config, services, StateSlot(initial_state(config, rules)), None, tmp_path)
    update = Gated()
    learn.update = update  # type: ignore[method-assign]
    starts = []
    one = Sample((1.0,), (False,))
    for n in range(1, 120):
        c.controller.add(one)
        learn.sampled(f"req_{n}", one, (VECTOR,))
        if learn._task is not None:
            starts.append(n)
            await update.next_start()
            update.release.set()
            await learn.drain()
    assert starts == [20, 30, 45, 67, 100]  # from tens, each time half as many again
    # rules alone skips the cheap tier after 30 samples that all disagree; held by the learner
    # (an early fit's bound may yet reach the target), it learns; released, it decides alone
    assert c.controller.mode.value == "skip"
    c.controller.keep_learning("an early fit may yet certify")
    assert c.controller.mode.value == "learning" and "may yet certify" in c.controller.estimate().reason
    c.controller.keep_learning(None)
    assert c.controller.mode.value == "skip"
