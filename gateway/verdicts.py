"""Feedback on served answers: a team says an answer was wrong (or right) by its request id.

`Feedback.report` finds the request in the ledger (only the reporter's team's: another team's
id is answered like one that does not exist), records the verdict (gateway/storage/verdict_store.py),
and for a cache hit reported wrong purges the entry that served it — on every replica, as any
purge — so the next such question is answered afresh. A semantic hit's pair of questions is
kept with the verdict as the team's label for `costgate cache calibrate --team`.

The same verdict twice is one verdict: the second report changes nothing and purges nothing (a
second purge could remove a good answer stored since under the same key).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from dataclasses import dataclass

from sqlalchemy.exc import SQLAlchemyError

from gateway.caching.response_cache import ResponseCache, backend_errors
from gateway.core.errors import NotFound, Unavailable
from gateway.storage.keys import KeyStore
from gateway.storage.ledger import LedgerWriter
from gateway.storage.verdict_store import AnsweredRequest, FeedbackRow, FeedbackStore, Recorded
from policies.answer_verdict import Verdict
from policies.semantic_cache.served import ServedHit
from policies.semantic_cache.verifier_calibration import Labelled

log = logging.getLogger("costgate.feedback")
ADMIN = "admin"  # `reported_by` of a report made through the admin API or the dashboard
HITS = ("exact", "semantic")


@dataclass(frozen=True, slots=True)
class Reporter:
    """Who reports: a key, which may report only its own team's requests, or the admin (any)."""

    name: str  # a key id, or ADMIN
    team_id: str | None  # None: the admin
    team_name: str | None = None


@dataclass(frozen=True, slots=True)
class Reported:
    row: FeedbackRow
    recorded: Recorded
    purged: bool  # this report removed the cache entry that served the answer


class Feedback:
    def __init__(self, store: FeedbackStore, cache: ResponseCache, ledger: LedgerWriter, keys: KeyStore) -> None:
        self.store = store
        self.cache = cache
        self.ledger = ledger
        self.keys = keys

    async def report(self, reporter: Reporter, request_id: str, verdict: Verdict, comment: str | None) -> Reported:
        try:
            request = await self._request(reporter, request_id)
            hit = await self._served(request)
            pair = (
                None
                if hit is None or hit.query is None or hit.stored is None
                else Labelled(hit.query, hit.stored, verdict is Verdict.RIGHT)
            )
            row = FeedbackRow(request, verdict, reporter.name, time.time(), comment, pair)
            recorded = await self.store.record(row)
            if recorded is Recorded.SAME:  # nothing written: answer with the verdict as it is stored
                stored = await self.store.stored(request_id)
                if stored is not None:
                    row = dataclasses.replace(row, comment=stored[0], updated_at=stored[1])
            purged = False
            if recorded is not Recorded.SAME and verdict is Verdict.WRONG and request.cache_status in HITS:
                purged = hit is not None and await self.cache.remove(hit)
                team = reporter.team_name or (await self.keys.find_team(request.team_id)).name
                self.cache.metrics.reported_false_hits.labels(team, request.cache_status).inc()
        except backend_errors(SQLAlchemyError) as err:
            log.warning("feedback on %s not recorded: %s", request_id, err)
            raise Unavailable("feedback cannot be recorded right now; try again shortly", retry_after=1) from None
        return Reported(row, recorded, purged)

    async def _request(self, reporter: Reporter, request_id: str) -> AnsweredRequest:
        request = await self.store.answered(request_id)
        if request is None:  # its ledger row may still be queued here: write it, and look again
            await self.ledger.flush()
            request = await self.store.answered(request_id)
        if request is None:
            # Or queued on the replica that answered it, which writes it within its flush
            # interval (the same setting on every replica): wait that long once, then look again.
            await asyncio.sleep(2 * self.ledger.flush_interval_s)
            request = await self.store.answered(request_id)
        if request is None or (reporter.team_id is not None and request.team_id != reporter.team_id):
            whose = "" if reporter.team_id is None else " of this key's team"
            raise NotFound(f"no answered request {request_id!r}{whose}", code="request_not_found", param="request_id")
        return request

    async def _served(self, request: AnsweredRequest) -> ServedHit | None:
        if request.cache_status not in HITS:
            return None
        hit = await self.cache.served_hit(request.request_id)
        return hit if hit is not None and hit.team_id == request.team_id else None
