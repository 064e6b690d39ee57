"""The teams' verdicts (POST /v1/feedback) on one cascade's answers, as its learning
(gateway/routing/learning.py) reads them from the feedback store: which tier's answer a team
judged on each request, to label the samples a refit trains on; and each team's verdicts on the
last tier's fresh answers, with its share of those answers, for the last tier's quality A
(policies/quality_controller.py `last_tier_feedback`). A store that cannot be read is logged and
read as no verdicts: the learning goes on, on agreement alone."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.exc import SQLAlchemyError

from gateway.storage.verdict_store import FeedbackStore
from policies.answer_verdict import Verdict
from policies.quality import TeamVerdicts

log = logging.getLogger("costgate.cascade")


@dataclass(frozen=True, slots=True)
class CascadeVerdicts:
    """One cascade's verdicts; `store` None: the gateway keeps none."""

    store: FeedbackStore | None
    name: str  # the cascade's, the model name its requests asked for
    tiers: Sequence[str]

    async def on_requests(self) -> dict[str, tuple[int | None, bool | None]]:
        """Request id -> (the tier whose answer a team judged, whether right); a request without a
        verdict on one of the tiers' answers is absent."""
        if self.store is None:
            return {}
        try:
            rows = await self.store.verdicts(requested_model=self.name)
        except SQLAlchemyError as err:
            log.warning("cascade %s: verdicts not read (%s); refitting on agreement alone", self.name, err)
            return {}
        return {
            r.request.request_id: (self.tiers.index(r.request.served_model), r.verdict is Verdict.RIGHT)
            for r in rows
            if r.request.served_model in self.tiers
        }

    async def last_tier_counts(self) -> tuple[TeamVerdicts, ...] | None:
        """Each team's verdicts on the last tier's fresh answers, with how many such answers it
        got (its share of the traffic); None: not read."""
        if self.store is None:
            return None
        name, last = self.name, self.tiers[-1]
        try:
            counts = await self.store.counts()
            answered = await self.store.answered_counts(name, last)
        except SQLAlchemyError as err:
            log.warning("cascade %s: verdicts not read (%s)", name, err)
            return None
        mine = [n for n in counts if n.requested_model == name and n.served_model == last and n.cache_status == "miss"]
        teams = {n.team_id for n in mine} | set(answered)
        return tuple(
            TeamVerdicts(
                team,
                sum(n.count for n in mine if n.team_id == team and n.verdict is Verdict.RIGHT),
                sum(n.count for n in mine if n.team_id == team),
                answered.get(team, 0),
            )
            for team in sorted(teams)
        )
