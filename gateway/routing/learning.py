"""A cascade that learns from its own traffic: its learned scorer refitted from its samples.

Every `refit_every` new samples (shadow samples and escalated requests alike), a background
task reads the cascade's latest `max_samples` stored samples and the teams' verdicts on their
requests (POST /v1/feedback), and hands them to the pure decision (policies/scorers/refit.py):
a candidate fitted on the older part, ranked against the current scorer on the newest part it
never saw. The fit runs in a worker thread (`asyncio.to_thread`), off the event loop.

Only a candidate that wins replaces the scorer. The new scorer comes with its own calibration
and a quality controller rebuilt on it from the same samples, rescored by the new scorer (each
sample keeps its feature vectors); both are swapped in one step on the event loop, after the
samples taken while the fit ran are added, so no request ever sees a scorer with another's
threshold. A kept scorer is written to the data directory and loaded at the next start (unless
the config names another scorer since). Every attempt is logged with its reason.

The verdicts also set the last tier's quality A (policies/quality_controller.py
`last_tier_feedback`): the share of the cascade's last-tier answers judged right, once there are
enough of them. That is read at start and every `refit_every` samples for every cascade,
whatever its scorer; only a learned scorer is refitted.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.exc import SQLAlchemyError

from gateway.routing.cascade import CascadeTarget, PureConfidence, build_controller
from gateway.storage.cascade_samples import StoredSample
from gateway.storage.feedback import FeedbackStore
from policies.feedback import Verdict
from policies.quality import Sample
from policies.quality_controller import QualityController
from policies.scorers.learned import LearnedModel, LearnedScorer
from policies.scorers.refit import Verdict as RefitVerdict
from policies.scorers.refit import refit, rescored, rows_of

log = logging.getLogger("costgate.cascade")
Vectors = tuple[tuple[float, ...], ...]


@dataclass(frozen=True, slots=True)
class Attempt:
    """One refit, for /admin/cascades."""

    at: float  # epoch seconds
    rows: int  # cheap answers it had (train and held-back parts together)
    labelled: int  # ... of which a team's verdict labelled
    verdict: RefitVerdict


class Learning:
    """Refits one cascade's learned scorer, and reads the teams' verdicts on its last tier
    (`Learner` in cascade.py)."""

    def __init__(
        self, cascade: CascadeTarget, model: LearnedModel | None, feedback: FeedbackStore | None, data_dir: Path
    ) -> None:
        self.cascade = cascade
        self.model = model  # None: the scorer is not refitted (not a learned one, or refit: false)
        self.feedback = feedback
        self.path = data_dir / "cascades" / (re.sub(r"[^A-Za-z0-9_.-]", "_", cascade.name) + ".learned.json")
        self.every = cascade.config.refit_every
        self.since = 0  # samples since the last refit started
        self.tried = 0
        self.replaced = 0
        self.last: Attempt | None = None
        self.last_replaced: Attempt | None = None
        self.refitted = False  # the scorer in use is a refitted one (this run's, or loaded from `path`)
        self._fresh: list[tuple[Sample, Vectors]] | None = None  # samples taken while a refit runs
        self._task: asyncio.Task[Attempt | None] | None = None

    # Learner
    def sampled(self, sample: Sample, vectors: Vectors) -> None:
        if self._fresh is not None:
            self._fresh.append((sample, vectors))
        self.since += 1
        self._maybe_start()

    def _maybe_start(self) -> None:
        if self.since >= self.every and self._task is None:
            self.since = 0
            self._task = asyncio.get_running_loop().create_task(self.update())
            self._task.add_done_callback(self._done)

    async def load(self) -> None:
        c = self.cascade
        if self.model is None:
            c.controller.add(*await c.services.store.recent(c.name, c.config.max_samples))
            await self._last_tier_quality(c.controller)
            return
        saved = await asyncio.to_thread(self._read_saved)
        if saved is not None:
            self.model, self.refitted = saved, True
            c.scorer = PureConfidence(LearnedScorer(saved))
            c.controller = build_controller(c.config, c.scorer)
            log.info("cascade %s: loaded the scorer refitted by a previous run (%s)", c.name, self.path)
        stored = await c.services.store.stored(c.name, c.config.max_samples)
        # The stored confidences may be another scorer's: rescore what can be, keep the rest.
        model = self.model
        c.controller.add(*(rescored(s.sample, s.features, model) if s.features else s.sample for s in stored))
        await self._last_tier_quality(c.controller)

    async def drain(self) -> None:
        if self._task is not None:
            await asyncio.wait({self._task}, timeout=30)

    def _done(self, task: asyncio.Task[Attempt | None]) -> None:
        self._task = None
        if not task.cancelled() and task.exception() is not None:
            log.error("cascade %s: refit failed", self.cascade.name, exc_info=task.exception())
        self._maybe_start()  # the samples taken while it ran may be due another

    async def update(self) -> Attempt | None:
        """The verdicts on the last tier read again; then, for a learned scorer, one refit."""
        await self._last_tier_quality(self.cascade.controller)
        return None if self.model is None else await self.refit(self.model)

    async def refit(self, current: LearnedModel) -> Attempt:
        """One refit: fit, compare, and swap when the candidate wins."""
        c = self.cascade
        try:
            stored = [s for s in await c.services.store.stored(c.name, c.config.max_samples) if s.features]
            self._fresh = []  # from here on, new samples are added to the new controller, if any
            verdicts = await self._verdicts()
            tiers = [t.name for t in c.tiers]
            rows = [
                row
                for s in stored
                for row in rows_of(s.sample, s.features or (), *_judged(verdicts.get(s.request_id or ""), tiers))
            ]
            rejected = c.controller.rejected
            new, verdict = await asyncio.to_thread(refit, rows, current, rejected)
            attempt = Attempt(time.time(), len(rows), sum(r.acceptable is not None for r in rows), verdict)
            self.tried += 1
            self.last = attempt
            outcome = "kept" if new is None else "replaced"
            c.services.policy_metrics.cascade_refits.labels(c.name, outcome).inc()
            if new is None:
                log.info(
                    "cascade %s: refit on %d samples kept the current scorer: %s", c.name, len(rows), verdict.reason
                )
                return attempt
            controller = await asyncio.to_thread(self._controller_for, new, stored)
            await self._last_tier_quality(controller)
            # One step on the event loop: the samples taken meanwhile, then scorer and controller.
            fresh, self._fresh = self._fresh or [], None
            if fresh:
                controller.add(*(rescored(sample, vectors, new) for sample, vectors in fresh))
            c.scorer, c.controller, self.model = PureConfidence(LearnedScorer(new)), controller, new
            self.replaced += 1
            self.refitted = True
            self.last_replaced = attempt
            threshold = controller.threshold
            log.info(
                "cascade %s: refit on %d samples replaced the scorer (%s); threshold now %s",
                c.name,
                len(rows),
                verdict.reason,
                "escalate all" if threshold is None else f"{threshold:.2f}",
            )
            await asyncio.to_thread(self._write, new)
            return attempt
        finally:
            self._fresh = None

    def _controller_for(self, model: LearnedModel, stored: Sequence[StoredSample]) -> QualityController:
        c = self.cascade
        controller = build_controller(c.config, PureConfidence(LearnedScorer(model)))
        controller.add(*(rescored(s.sample, s.features or (), model) for s in stored))
        return controller

    async def _verdicts(self) -> dict[str, tuple[str | None, Verdict]]:
        """The teams' verdicts on this cascade's requests: request id -> (served model, verdict)."""
        if self.feedback is None:
            return {}
        try:
            rows = await self.feedback.verdicts(requested_model=self.cascade.name)
        except SQLAlchemyError as err:
            log.warning("cascade %s: verdicts not read (%s); refitting on agreement alone", self.cascade.name, err)
            return {}
        return {r.request.request_id: (r.request.served_model, r.verdict) for r in rows}

    async def _last_tier_quality(self, controller: QualityController) -> None:
        if self.feedback is None:
            return
        c = self.cascade
        try:
            counts = await self.feedback.counts()
        except SQLAlchemyError as err:
            log.warning("cascade %s: verdicts not read (%s)", c.name, err)
            return
        last = c.tiers[-1].name
        mine = [
            n for n in counts if n.requested_model == c.name and n.served_model == last and n.cache_status == "miss"
        ]
        right = sum(n.count for n in mine if n.verdict is Verdict.RIGHT)
        controller.last_tier_feedback(right, sum(n.count for n in mine))

    def _read_saved(self) -> LearnedModel | None:
        if not self.path.is_file():
            return None
        try:
            if json.loads(self.path.read_text()).get("refit_of") != self.cascade.config.scorer:
                return None  # refitted from a scorer the config no longer names
            return LearnedModel.load(self.path)
        except (OSError, ValueError) as err:
            log.warning("cascade %s: the refitted scorer %s is not loaded: %s", self.cascade.name, self.path, err)
            return None

    def _write(self, model: LearnedModel) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            partial = self.path.with_suffix(".partial")
            partial.write_text(json.dumps({**model.to_json(), "refit_of": self.cascade.config.scorer}) + "\n")
            partial.replace(self.path)
        except OSError as err:
            log.warning("cascade %s: the refitted scorer is not kept across restarts: %s", self.cascade.name, err)

    def view(self) -> dict:
        """What /admin/cascades shows of the refits."""
        if self.model is None:
            c = self.cascade.config
            return {
                "enabled": False,
                "why": (
                    "refit: false in the config"
                    if not c.refit
                    else "adaptive: false keeps the configured thresholds, set for the scorer as it is"
                    if not c.adaptive
                    else "only a learned scorer is refitted"
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
            "every": self.every,
            "tried": self.tried,
            "replaced": self.replaced,
            "running": self._task is not None,
            "scorer_in_use": "refitted" if self.refitted else "as configured",
            "last_replaced_at": None if self.last_replaced is None else self.last_replaced.at,
            "last": attempt(self.last),
        }


def _judged(found: tuple[str | None, Verdict] | None, tiers: Sequence[str]) -> tuple[int | None, bool | None]:
    """(the tier whose answer a team judged, whether right), or (None, None) without a verdict."""
    if found is None or found[0] not in tiers:
        return None, None
    return tiers.index(found[0]), found[1] is Verdict.RIGHT


def learning_for(cascade: CascadeTarget, feedback: FeedbackStore | None, data_dir: Path) -> Learning:
    """The cascade's learning: its learned scorer refitted unless `refit: false`; verdicts read."""
    scorer, model = cascade.scorer, None
    refits = cascade.config.refit and cascade.config.adaptive  # fixed thresholds were set for the scorer as it is
    if refits and isinstance(scorer, PureConfidence) and isinstance(scorer.scorer, LearnedScorer):
        model = scorer.scorer.model
    return Learning(cascade, model, feedback, data_dir)
