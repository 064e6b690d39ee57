"""A cascade that learns from its own traffic: its learned scorer refitted from its samples.

Every `refit_every` new samples (shadow samples and escalated requests alike), a background
task reads the cascade's latest `max_samples` stored samples and the teams' verdicts on their
requests (POST /v1/feedback), and hands them to the fit that is due
(gateway/routing/scorer_candidates.py, over the pure decision of policies/scorers/refit.py): a
candidate fitted on the older part, ranked against the current scorer on the newest part it
never saw. The fit runs in a worker thread (`asyncio.to_thread`), off the event loop; this module
schedules the fits, swaps a winner in and keeps it.

Only a candidate that wins replaces the scorer (against a calibration with correctness labels
that holds, it must also certify the target for less: `Incumbent`, the cascade as it is). The
new scorer comes with its own calibration and a quality controller rebuilt on it from the same
samples, rescored by the new scorer (each sample keeps its feature vectors); both go into the
cascade's `StateSlot` as one new `CascadeState`, in one step on the event loop, after the samples
taken while the fit ran are added, so no request ever sees a scorer with another's threshold. The
learning holds the cascade's settings, services and slot, never the cascade itself: it produces
values, and the request path reads them. A kept scorer is written to the data directory and
loaded at the next start (unless the config names another scorer since). Every attempt is logged
with its reason.

A cascade on `rules` or `logprob` is upgraded instead (policies/scorers/refit.py `upgrade`): every
`refit_every` samples a learned candidate is fitted on its samples and compared with the
confidences its scorer gave the held-back ones, by the same rule; a winner is swapped in (with
its controller, the same way) only when that controller certifies a threshold from the
candidate's cross-validated calibration. From then on it is refitted like any learned scorer,
and kept across restarts the same way (`refit_of` names the configured scorer).

The verdicts also set the last tier's quality A (policies/quality_controller.py
`last_tier_feedback`): the share of the cascade's last-tier answers judged right, once there are
enough of them, each team's verdicts weighted by its share of those answers (so one team that
reports much cannot set the figure every team's requests are routed by). That is read at start
and every `refit_every` samples for every cascade, whatever its scorer; a judge's is neither
refitted nor upgraded.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from gateway.config.settings import CascadeConfig
from gateway.routing.cascade import build_controller
from gateway.routing.cascade_services import Services, StateSlot
from gateway.routing.cascade_verdicts import CascadeVerdicts
from gateway.routing.confidence import PureConfidence
from gateway.routing.kept_scorer import KeptScorer
from gateway.routing.scorer_candidates import Fit, FitData, early_candidate, refit_candidate, upgrade_candidate
from gateway.storage.cascade_samples import StoredSample
from gateway.storage.verdict_store import FeedbackStore
from policies.precall import router_at
from policies.quality import Sample, TeamVerdicts
from policies.quality_controller import QualityController
from policies.scorers.fit_schedule import FitSchedule
from policies.scorers.learned import LearnedModel, LearnedScorer
from policies.scorers.logprob import LogprobScorer
from policies.scorers.refit import TrainingRow, rescored, rows_of
from policies.scorers.refit import Verdict as RefitVerdict
from policies.scorers.rules import RuleScorer

log = logging.getLogger("costgate.cascade")
Vectors = tuple[tuple[float, ...], ...]
UPGRADED = "learned (refit from traffic)"  # the scorer in use, once a rules or logprob cascade upgraded


@dataclass(frozen=True, slots=True)
class Attempt:
    """One refit, for /admin/cascades."""

    at: float  # epoch seconds
    rows: int  # cheap answers it had (train and held-back parts together)
    labelled: int  # ... of which a team's verdict labelled
    verdict: RefitVerdict


class Learning:
    """Refits one cascade's learned scorer (or upgrades a rules or logprob one to a learned
    scorer), and reads the teams' verdicts on its last tier (`Learner` in cascade.py)."""

    def __init__(
        self,
        config: CascadeConfig,
        services: Services,
        slot: StateSlot,
        model: LearnedModel | None,
        feedback: FeedbackStore | None,
        data_dir: Path,
        upgrades: bool = False,
    ) -> None:
        self.config = config
        self.services = services
        self.slot = slot  # the cascade's state: this learning is its only writer
        self.model = model  # the learned scorer in use, refitted; None: none (yet)
        self.upgrades = upgrades  # a rules or logprob scorer: a learned one may replace it
        self.upgraded = False  # ... and has (this run, or a previous one's, loaded from `kept`)
        self.verdicts = CascadeVerdicts(feedback, config.name, config.tiers)  # the teams', on its answers
        self.kept = KeptScorer.in_dir(data_dir, config.name, config.scorer)  # the scorer it replaced, across restarts
        self.schedule = FitSchedule.of(config.refit_every, early=upgrades)  # when the next fit is due
        self.tried = 0
        self.replaced = 0
        self.last: Attempt | None = None
        self.last_replaced: Attempt | None = None
        self.refitted = False  # the scorer in use is a refitted one (this run's, or loaded from `kept`)
        # Samples taken while a refit runs, by request id: from before it reads the stored ones,
        # so none falls between (those it also reads back are not added twice).
        self._fresh: list[tuple[str, Sample, Vectors]] | None = None
        self._task: asyncio.Task[Attempt | None] | None = None

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def controller(self) -> QualityController:
        """The controller in use now (the slot's)."""
        return self.slot.current.controller

    # Learner
    def sampled(self, request_id: str, sample: Sample, vectors: Vectors) -> None:
        if self._fresh is not None:
            self._fresh.append((request_id, sample, vectors))
        self.schedule.sampled()
        self._maybe_start()

    def _maybe_start(self) -> None:
        if self.schedule.due and self._task is None:
            self.schedule.started()
            self._task = asyncio.get_running_loop().create_task(self.update())
            self._task.add_done_callback(self._done)

    async def load(self) -> None:
        saved = await asyncio.to_thread(self.kept.read) if self.model is not None or self.upgrades else None
        if saved is not None:
            self.model, self.refitted, self.upgraded = saved, True, self.upgrades
            scorer = PureConfidence(LearnedScorer(saved))
            self.slot.replace(
                replace(self.slot.current, scorer=scorer, controller=build_controller(self.config, scorer))
            )
            log.info("cascade %s: loaded the scorer refitted by a previous run (%s)", self.name, self.kept.path)
        controller = self.controller
        if self.model is None:
            recent = await self.services.store.recent(self.name, self.config.max_samples)
            controller.add(*recent)
            self.schedule.stored(len(recent), fit_on_them=self.upgrades and not self.upgraded)
            await self._last_tier_quality(controller)
            return
        stored = await self.services.store.stored(self.name, self.config.max_samples)
        self.schedule.stored(len(stored), fit_on_them=self.upgrades and not self.upgraded)
        # The stored confidences may be another scorer's: rescore what can be, keep the rest.
        model = self.model
        controller.add(*(rescored(s.sample, s.features, model) if s.features else s.sample for s in stored))
        await self._last_tier_quality(controller)

    async def drain(self) -> None:
        if self._task is not None:
            await asyncio.wait({self._task}, timeout=30)

    def _done(self, task: asyncio.Task[Attempt | None]) -> None:
        self._task = None
        if not task.cancelled() and task.exception() is not None:
            log.error("cascade %s: refit failed", self.name, exc_info=task.exception())
        self._maybe_start()  # the samples taken while it ran may be due another

    async def update(self) -> Attempt | None:
        """The verdicts on the last tier read again (once: every fit below is given them); then,
        for a learned scorer, one refit, and for a rules or logprob one, one try at upgrading it."""
        counts = await self.verdicts.last_tier_counts()
        if counts is not None:
            self.controller.last_tier_feedback(counts)
        attempt: Attempt | None = None
        if self.upgrades and not self.upgraded and self.schedule.before_held_back:
            attempt = await self._fit(early_candidate, counts)
        elif self.model is not None:
            attempt = await self._fit(partial(refit_candidate, current=self.model), counts)
        elif self.upgrades:
            attempt = await self._fit(upgrade_candidate, counts)
        await self.train_router()
        return attempt

    async def train_router(self) -> None:
        """The router before the call (policies/precall.py), on the same samples: each labelled by
        whether the scorer in use accepts its cheap answer at the threshold now. None while the
        cascade certifies no threshold (it escalates or skips every request anyway)."""
        threshold, model = self.controller.threshold, self.model
        if threshold is None or not self.config.router:
            self.slot.replace(replace(self.slot.current, router=None))
            return
        stored = await self.services.store.stored(self.name, self.config.max_samples)
        samples = [(s.sample, s.features or ()) for s in stored]
        router = await asyncio.to_thread(router_at, threshold, samples, model)  # labelled off the loop too
        self.slot.replace(replace(self.slot.current, router=router))  # the scorer and controller now in use

    async def _rows(self) -> tuple[list[StoredSample], list[TrainingRow]]:
        """The stored samples with feature vectors, and their training rows (teams' verdicts as
        labels). Samples taken from before the read on are kept aside (`_fresh`) for the new
        controller: one stored while the read runs may or may not be in it, and is added once."""
        self._fresh = []
        stored = [s for s in await self.services.store.stored(self.name, self.config.max_samples) if s.features]
        judged = await self.verdicts.on_requests()
        rows = [
            row
            for s in stored
            for row in rows_of(s.sample, s.features or (), *judged.get(s.request_id or "", (None, None)))
        ]
        return stored, rows

    def _tried(self, rows: Sequence[TrainingRow], verdict: RefitVerdict, replaced: bool) -> Attempt:
        attempt = Attempt(time.time(), len(rows), sum(r.acceptable is not None for r in rows), verdict)
        self.tried += 1
        self.last = attempt
        self.services.policy_metrics.cascade_refits.labels(self.name, "replaced" if replaced else "kept").inc()
        return attempt

    def _swap(
        self, model: LearnedModel, controller: QualityController, attempt: Attempt, stored: Sequence[StoredSample]
    ) -> None:
        """Scorer and controller in one step on the event loop, after the samples taken meanwhile
        that the controller was not built from (`stored`): one new state in the slot."""
        taken, self._fresh = self._fresh or [], None
        known = {s.request_id for s in stored}
        fresh = [(sample, vectors) for request_id, sample, vectors in taken if request_id not in known]
        if fresh:
            controller.add(*(rescored(sample, vectors, model) for sample, vectors in fresh))
        scorer = PureConfidence(LearnedScorer(model))
        self.slot.replace(replace(self.slot.current, scorer=scorer, controller=controller))
        self.model = model
        self.replaced += 1
        self.refitted = True
        self.last_replaced = attempt

    async def _fit(self, fit: Fit, feedback: tuple[TeamVerdicts, ...] | None) -> Attempt:
        """One fit on the stored samples (gateway/routing/scorer_candidates.py); a winner swapped in
        with its controller, and kept for the next start."""
        try:
            stored, rows = await self._rows()
            samples = [(s.sample, s.features or ()) for s in stored]
            candidate = await fit(self.config, self.controller, FitData(rows, samples, feedback))
            if candidate.learning is not None:
                self.controller.keep_learning(candidate.learning.why)
            model, controller = candidate.model, candidate.controller
            attempt = self._tried(rows, candidate.verdict, model is not None)
            if model is None or controller is None:
                return attempt
            self._swap(model, controller, attempt, stored)
            if candidate.upgrades:
                self.upgraded = True
            log.info("cascade %s: %s", self.name, candidate.news())
            await asyncio.to_thread(self.kept.write, model)
            return attempt
        finally:
            self._fresh = None

    async def _last_tier_quality(self, controller: QualityController) -> None:
        counts = await self.verdicts.last_tier_counts()
        if counts is not None:
            controller.last_tier_feedback(counts)

    @property
    def scorer_in_use(self) -> str:
        """The scorer answering now, in words: the configured one, or the learned one that
        replaced it (`UPGRADED` for a rules or logprob cascade)."""
        configured = self.config.scorer
        if self.upgraded:
            return UPGRADED
        return f"{configured} (refitted)" if self.refitted else configured

    def view(self) -> dict:
        """What /admin/cascades shows of the refits."""
        if self.model is None and not self.upgrades:
            c = self.config
            return {
                "enabled": False,
                "why": (
                    "refit: false in the config"
                    if not c.refit
                    else "adaptive: false keeps the configured thresholds, set for the scorer as it is"
                    if not c.adaptive
                    else "a judge's grades are neither refitted nor replaced by a learned scorer"
                ),
            }

        def attempt(a: Attempt | None) -> dict | None:
            if a is None:
                return None
            v = a.verdict
            return {
                "at": a.at,
                "samples": a.rows,
                "labelled_by_feedback": a.labelled,
                "held_back": v.held_back,
                "current_auc": v.current_auc,
                "candidate_auc": v.candidate_auc,
                "replaced": v.replace,
                "reason": v.reason,
            }

        return {
            "enabled": True,
            "every": self.schedule.every,
            "tried": self.tried,
            "replaced": self.replaced,
            "running": self._task is not None,
            "scorer_in_use": UPGRADED if self.upgraded else "refitted" if self.refitted else "as configured",
            # a rules or logprob scorer: a learned one trained on the samples replaces it when it wins
            "upgrades": self.upgrades,
            "last_replaced_at": None if self.last_replaced is None else self.last_replaced.at,
            "last": attempt(self.last),
        }


def learning_for(
    config: CascadeConfig, services: Services, slot: StateSlot, feedback: FeedbackStore | None, data_dir: Path
) -> Learning:
    """The cascade's learning: its learned scorer refitted, or its rules or logprob scorer upgraded
    to a learned one, unless `refit: false` or `adaptive: false`; verdicts read."""
    scorer, model, upgrades = slot.current.scorer, None, False
    refits = config.refit and config.adaptive  # fixed thresholds were set for the scorer as it is
    if refits and isinstance(scorer, PureConfidence):
        if isinstance(scorer.scorer, LearnedScorer):
            model = scorer.scorer.model
        upgrades = isinstance(scorer.scorer, RuleScorer | LogprobScorer)
    return Learning(config, services, slot, model, feedback, data_dir, upgrades)
