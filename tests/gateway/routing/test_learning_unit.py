"""A cascade's learning (gateway/routing/learning.py), in-process: the sample store and the
feedback store are faked at their methods, the pure fit (policies/scorers/refit.py) replaced
where the test needs a chosen outcome, and the event loop driven by asyncio events, no sleeps.
What it must do: start one background refit every `refit_every` samples, at most one at a time
and another after it if due; swap scorer and controller in one step, with the samples taken
while the fit ran; keep a replaced scorer in the data directory and load it back at the next
start; and set the last tier's quality from the teams' verdicts on its answers."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from prometheus_client import CollectorRegistry
from sqlalchemy.exc import SQLAlchemyError

from gateway.config.settings import CascadeConfig
from gateway.routing import learning as learning_module
from gateway.routing.cascade import initial_state
from gateway.routing.cascade_metrics import PolicyMetrics
from gateway.routing.cascade_services import Services, StateSlot
from gateway.routing.confidence import PureConfidence
from gateway.routing.learning import UPGRADED, Learning, learning_for
from gateway.storage.cascade_samples import StoredSample
from gateway.storage.verdict_store import AnsweredRequest, FeedbackRow
from policies.answer_verdict import Verdict, VerdictCount
from policies.quality import Sample
from policies.quality_controller import QualityController
from policies.scorers.answer_features import NAMES
from policies.scorers.fit_schedule import EARLY_ROWS
from policies.scorers.learned import LearnedModel, LearnedScorer, LogisticModel
from policies.scorers.refit import TrainingRow, Upgrade, controller_for
from policies.scorers.refit import Verdict as RefitVerdict
from policies.scorers.rules import RuleScorer

NAME = "team/cascade"  # written to disk as team_cascade.learned.json
EVERY = 10
VECTOR = tuple(0.0 for _ in NAMES)


def model(bias: float) -> LearnedModel:
    """A learned scorer that gives every answer the same confidence, sigmoid(bias)."""
    n = len(NAMES)
    return LearnedModel(LogisticModel(NAMES, np.zeros(n), np.ones(n), np.zeros(n), bias))


def confidence(m: LearnedModel) -> float:
    return m.confidence_of(VECTOR)


class FakeSamples:
    """The sample store at the two methods learning reads; `stored` may be held at a gate."""

    def __init__(self, stored: list[StoredSample]) -> None:
        self.samples = stored
        self.gate: asyncio.Event | None = None
        self.reading = asyncio.Event()

    async def recent(self, cascade: str, limit: int) -> list[Sample]:
        return [s.sample for s in self.samples]

    async def stored(self, cascade: str, limit: int) -> list[StoredSample]:
        """What was stored when the read began (a database snapshot), after the gate."""
        found = list(self.samples)
        self.reading.set()
        if self.gate is not None:
            await self.gate.wait()
        return found


class FakeFeedback:
    """The feedback store: verdict counts and verdict rows; `verdicts` may be held at a gate
    (it is read after learning starts keeping the samples taken meanwhile aside)."""

    def __init__(self, counts: list[VerdictCount] | None = None, rows: list[FeedbackRow] | None = None) -> None:
        self.counts_list = counts or []
        self.answered: dict[tuple[str, str], dict[str, int]] = {}  # (cascade, tier) -> team -> fresh answers
        self.rows = rows or []
        self.gate: asyncio.Event | None = None
        self.reading = asyncio.Event()
        self.down = False

    async def counts(self) -> list[VerdictCount]:
        if self.down:
            raise SQLAlchemyError("store down")
        return list(self.counts_list)

    async def answered_counts(self, requested_model: str, served_model: str) -> dict[str, int]:
        return dict(self.answered.get((requested_model, served_model), {}))

    async def verdicts(self, requested_model: str | None = None) -> list[FeedbackRow]:
        self.reading.set()
        if self.gate is not None:
            await self.gate.wait()
        if self.down:
            raise SQLAlchemyError("store down")
        return [r for r in self.rows if r.request.requested_model == requested_model]


def stored(n: int, agrees: bool = True) -> list[StoredSample]:
    return [StoredSample(f"req_{i}", Sample((0.3,), (agrees,)), (VECTOR,)) for i in range(n)]


def learning(
    tmp_path: Path,
    samples: FakeSamples | None = None,
    feedback: FakeFeedback | None = None,
    scorer: str = "scorers/mine.json",
    current: Any = None,
) -> Learning:
    """A cascade's learning, with the slot it writes (its cascade's request path is not needed)."""
    config = CascadeConfig(name=NAME, tiers=["cheap", "best"], scorer=scorer, refit_every=EVERY, max_samples=1000)
    confidence_ = PureConfidence(LearnedScorer(model(0.0)) if current is None else current)
    store = samples or FakeSamples([])
    services = Services(None, None, None, PolicyMetrics(CollectorRegistry()), store)  # type: ignore[arg-type]
    slot = StateSlot(initial_state(config, confidence_))
    return learning_for(config, services, slot, feedback, tmp_path)  # type: ignore[arg-type]


def refits(learn: Learning, outcome: str) -> float:
    metrics = learn.services.policy_metrics
    return (
        metrics.registry.get_sample_value("costgate_cascade_refits_total", {"cascade": NAME, "outcome": outcome}) or 0
    )


def verdict(replace: bool) -> RefitVerdict:
    return RefitVerdict(replace, 0.6, 0.8 if replace else 0.5, 30, "candidate ranks better" if replace else "no gain")


def scorer_model(learn: Learning) -> LearnedModel:
    """The learned model of the scorer in the slot now."""
    scorer = learn.slot.current.scorer
    assert isinstance(scorer, PureConfidence) and isinstance(scorer.scorer, LearnedScorer)
    return scorer.scorer.model


class Gated:
    """`Learning.update` replaced: each run sets `started` and waits for `release`."""

    def __init__(self, fail_first: bool = False) -> None:
        self.runs = 0
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.fail_first = fail_first

    async def __call__(self) -> None:
        self.runs += 1
        self.started.set()
        await self.release.wait()
        self.release.clear()
        if self.fail_first and self.runs == 1:
            raise RuntimeError("fit blew up")

    async def next_start(self) -> None:
        await asyncio.wait_for(self.started.wait(), 30)
        self.started.clear()


async def test_a_refit_starts_every_refit_every_samples_one_at_a_time_then_another_if_due(tmp_path: Path) -> None:
    learn = learning(tmp_path)
    update = Gated()
    learn.update = update  # type: ignore[method-assign]
    one = Sample((0.5,), (True,))
    for _ in range(EVERY - 1):
        learn.sampled("req_new1", one, (VECTOR,))
    assert learn._task is None and learn.schedule.since == EVERY - 1  # not due yet
    learn.sampled("req_new2", one, (VECTOR,))
    await update.next_start()
    assert update.runs == 1 and learn.schedule.since == 0 and learn.view()["running"]
    for _ in range(2 * EVERY + 5):  # due again, twice over, while the first runs: none starts
        learn.sampled("req_new3", one, (VECTOR,))
    assert update.runs == 1 and learn.schedule.since == 2 * EVERY + 5
    update.release.set()
    await update.next_start()  # the samples taken meanwhile were due: one more, right after
    assert update.runs == 2 and learn.schedule.since == 0
    update.release.set()
    await learn.drain()
    assert update.runs == 2 and learn._task is None and not learn.view()["running"]


async def test_a_failed_refit_is_logged_and_the_next_one_still_starts(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    learn = learning(tmp_path)
    update = Gated(fail_first=True)
    learn.update = update  # type: ignore[method-assign]
    for _ in range(2 * EVERY):
        learn.sampled("req_new4", Sample((0.5,), (True,)), (VECTOR,))
    await update.next_start()
    update.release.set()
    await update.next_start()
    assert update.runs == 2 and "refit failed" in caplog.text
    update.release.set()
    await learn.drain()


async def test_a_winning_refit_swaps_scorer_and_controller_with_the_samples_taken_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    samples = FakeSamples(stored(40))
    answered = AnsweredRequest("req_3", "team_a1", None, NAME, "best", "miss", 0.0)
    feedback = FakeFeedback(rows=[FeedbackRow(answered, Verdict.RIGHT, "team_a1", 0.0)])
    learn = learning(tmp_path, samples, feedback)
    c, old_model, old_controller = learn, learn.model, learn.controller
    new = model(2.0)
    seen: list[Sequence[TrainingRow]] = []

    def fake_refit(rows: Sequence[TrainingRow], current: LearnedModel, *_: Any, **__: Any) -> Any:
        assert current is old_model
        seen.append(rows)
        return new, verdict(True)

    monkeypatch.setattr(learning_module, "refit", fake_refit)
    feedback.gate = asyncio.Event()
    task = asyncio.create_task(learn.update())
    await asyncio.wait_for(feedback.reading.wait(), 30)  # the refit has read the samples...
    fresh = Sample((0.1,), (False,))
    learn.sampled("req_new5", fresh, (VECTOR,))  # ... and these come while it runs
    learn.sampled("req_new6", fresh, (VECTOR,))
    assert c.controller is old_controller and scorer_model(c) is old_model  # nothing swapped yet
    feedback.gate.set()
    attempt = await task
    assert attempt is not None and attempt.verdict.replace
    # one step: the new scorer and a controller rebuilt on it, the fresh samples added rescored
    assert scorer_model(c) is new and learn.model is new and c.controller is not old_controller
    assert c.controller.calibration is new.calibration
    assert len(c.controller.samples) == 40 + 2
    assert all(s.confidences == (confidence(new),) for s in c.controller.samples)
    assert [s.agrees for s in c.controller.samples][-2:] == [(False,), (False,)]
    assert learn._fresh is None and (learn.tried, learn.replaced) == (1, 1) and learn.refitted
    assert learn.last is attempt and learn.last_replaced is attempt
    assert refits(learn, "replaced") == 1 and refits(learn, "kept") == 0
    # the verdict on req_3 (its last tier's answer, judged right) labelled its cheap answer
    [rows] = seen
    assert len(rows) == 40 and attempt.labelled == 1 and rows[3].acceptable is True
    assert learn.scorer_in_use == "scorers/mine.json (refitted)"
    saved = json.loads((tmp_path / "cascades" / "team_cascade.learned.json").read_text())
    assert saved["refit_of"] == "scorers/mine.json" and saved["accept"]["bias"] == 2.0


@pytest.mark.parametrize("read_back", [False, True])
async def test_a_sample_stored_while_the_refit_reads_the_store_is_counted_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, read_back: bool
) -> None:
    """Stored while the refit reads the store, a sample may come back with the read or not;
    either way the new controller has it, once."""
    samples = FakeSamples(stored(40))
    learn = learning(tmp_path, samples, FakeFeedback())
    monkeypatch.setattr(learning_module, "refit", lambda rows, *_, **__: (model(2.0), verdict(True)))
    during = StoredSample("req_during", Sample((0.1,), (False,)), (VECTOR,))
    if read_back:  # stored as the read began: in its snapshot
        samples.samples.append(during)
    samples.gate = asyncio.Event()
    task = asyncio.create_task(learn.update())
    await asyncio.wait_for(samples.reading.wait(), 30)  # the read has its snapshot
    if not read_back:  # stored just after: not in it
        samples.samples.append(during)
    learn.sampled("req_during", during.sample, (VECTOR,))
    samples.gate.set()
    attempt = await task
    assert attempt is not None and attempt.verdict.replace
    assert len(learn.controller.samples) == 41
    assert learn.controller.samples[-1].agrees == (False,)


async def test_a_losing_refit_keeps_the_scorer_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    feedback = FakeFeedback()
    feedback.down = True  # verdicts not read: the refit goes on, on agreement alone
    learn = learning(tmp_path, FakeSamples(stored(40)), feedback)
    c, old_model, old_controller = learn, learn.model, learn.controller
    monkeypatch.setattr(learning_module, "refit", lambda rows, *_, **__: (None, verdict(False)))
    learn.sampled("req_new7", Sample((0.5,), (True,)), (VECTOR,))  # nothing running: not kept aside
    assert learn._fresh is None
    attempt = await learn.update()
    assert attempt is not None and not attempt.verdict.replace and attempt.labelled == 0
    assert scorer_model(c) is old_model and c.controller is old_controller and learn._fresh is None
    assert (learn.tried, learn.replaced, learn.refitted) == (1, 0, False) and learn.last_replaced is None
    assert refits(learn, "kept") == 1 and refits(learn, "replaced") == 0
    assert not (tmp_path / "cascades").exists()


async def test_a_kept_scorer_is_loaded_back_at_the_next_start_with_the_samples_rescored(tmp_path: Path) -> None:
    samples = FakeSamples(stored(25))
    first = learning(tmp_path, samples)
    first.kept.write(model(2.0))
    again = learning(tmp_path, samples)  # the next start: the configured scorer again
    await again.load()
    c = again
    loaded = scorer_model(c)
    assert loaded.to_json() == model(2.0).to_json() and again.model is loaded and again.refitted
    assert len(c.controller.samples) == 25 and all(s.confidences == (confidence(loaded),) for s in c.controller.samples)
    assert again.scorer_in_use.endswith("(refitted)")


async def test_a_scorer_refitted_from_another_configured_one_or_unreadable_is_not_loaded(tmp_path: Path) -> None:
    learning(tmp_path).kept.write(model(2.0))
    other = learning(tmp_path, scorer="scorers/another.json")  # the config names another scorer since
    await other.load()
    assert scorer_model(other).to_json() == model(0.0).to_json() and not other.refitted
    (tmp_path / "cascades" / "team_cascade.learned.json").write_text("{not json")
    broken = learning(tmp_path)
    await broken.load()
    assert not broken.refitted and scorer_model(broken).to_json() == model(0.0).to_json()


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

    monkeypatch.setattr(learning_module, "upgrade", fake_upgrade)
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
