"""A cascade's learning refits its learned scorer (gateway/routing/learning.py), in-process: the
pure fit (policies/scorers/refit.py) replaced where the test needs a chosen outcome. What it must
do: start one background refit every `refit_every` samples, at most one at a time and another
after it if due; swap scorer and controller in one step, with the samples taken while the fit
ran; keep a replaced scorer in the data directory and load it back at the next start."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from gateway.routing import scorer_candidates
from gateway.storage.cascade_samples import StoredSample
from gateway.storage.verdict_store import AnsweredRequest, FeedbackRow
from policies.answer_verdict import Verdict
from policies.quality import Sample
from policies.scorers.learned import LearnedModel
from policies.scorers.refit import TrainingRow
from tests.gateway.routing.learning_support import (
    EVERY,
    NAME,
    VECTOR,
    FakeFeedback,
    FakeSamples,
    Gated,
    confidence,
    learning,
    model,
    refits,
    scorer_model,
    stored,
    verdict,
)


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

    monkeypatch.setattr(scorer_candidates, "refit", fake_refit)
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
    monkeypatch.setattr(scorer_candidates, "refit", lambda rows, *_, **__: (model(2.0), verdict(True)))
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
    monkeypatch.setattr(scorer_candidates, "refit", lambda rows, *_, **__: (None, verdict(False)))
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
