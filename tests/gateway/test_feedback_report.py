"""`Feedback.report` on its own (gateway/verdicts.py): its collaborators (the feedback store,
the response cache, the ledger writer, the key store) are faked at their edges, so each rule
is seen by itself — who may report what, a wrong cache hit's purge, the same verdict twice, a
semantic hit's labelled pair, a dependency's failure. tests/gateway/test_feedback.py drives
the same through a running gateway."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest
from sqlalchemy.exc import OperationalError

from gateway.core.errors import NotFound, Unavailable
from gateway.storage.verdict_store import AnsweredRequest, FeedbackRow, Recorded
from gateway.verdicts import ADMIN, Feedback, Reporter
from policies.answer_verdict import Verdict
from policies.semantic_cache.served import ServedHit
from policies.semantic_cache.verifier_calibration import Labelled

TEAM = Reporter("key_a1", "team_a1", "team-a")


def answered(cache_status: str = "miss", request_id: str = "req_1", team_id: str = "team_a1") -> AnsweredRequest:
    return AnsweredRequest(request_id, team_id, "key_a1", "small", "small", cache_status, 1000.0)


def hit(kind: str = "exact", team_id: str = "team_a1", **fields: Any) -> ServedHit:
    return ServedHit("req_1", team_id, kind, "entry-key", 900.0, 5000.0, **fields)


class FakeStore:
    """The feedback table: the ledger's answered requests (some only after a flush), and the verdicts."""

    def __init__(self, *requests: AnsweredRequest, after_flush: AnsweredRequest | None = None) -> None:
        self.requests = {r.request_id: r for r in requests}
        self.after_flush = after_flush
        self.verdicts: dict[str, Verdict] = {}
        self.rows: list[FeedbackRow] = []
        self.kept: dict[str, tuple[str | None, float]] = {}  # the stored verdict's comment and time
        self.fail = False

    async def answered(self, request_id: str) -> AnsweredRequest | None:
        if self.fail:
            raise OperationalError("SELECT", {}, Exception("database is down"))
        return self.requests.get(request_id)

    async def record(self, row: FeedbackRow) -> Recorded:
        self.rows.append(row)
        before = self.verdicts.get(row.request.request_id)
        if before is row.verdict:
            return Recorded.SAME  # nothing written, as in the table
        self.verdicts[row.request.request_id] = row.verdict
        self.kept[row.request.request_id] = (row.comment, row.updated_at)
        return Recorded.NEW if before is None else Recorded.CHANGED

    async def stored(self, request_id: str) -> tuple[str | None, float] | None:
        return self.kept.get(request_id)


class FakeLedger:
    flush_interval_s = 0.0  # the other replica's wait is no wait here

    def __init__(self, store: FakeStore) -> None:
        self.store, self.flushes = store, 0

    async def flush(self) -> None:
        self.flushes += 1
        if self.store.after_flush is not None:  # the row was queued here: the flush writes it
            self.store.requests[self.store.after_flush.request_id] = self.store.after_flush


@dataclass
class Counter:
    counts: dict[tuple[str, ...], int]
    key: tuple[str, ...] = ()

    def labels(self, *values: str) -> Counter:
        return Counter(self.counts, values)

    def inc(self) -> None:
        self.counts[self.key] = self.counts.get(self.key, 0) + 1


class FakeCache:
    """The response cache at its edge: the hit it served each request, and what was removed."""

    def __init__(self, served: ServedHit | None = None) -> None:
        self.served = served
        self.removed: list[ServedHit] = []
        self.false_hits: dict[tuple[str, ...], int] = {}
        self.metrics = SimpleNamespace(reported_false_hits=Counter(self.false_hits))

    async def served_hit(self, request_id: str) -> ServedHit | None:
        return self.served if self.served is not None and self.served.request_id == request_id else None

    async def remove(self, found: ServedHit) -> bool:
        self.removed.append(found)
        return True


class FakeKeys:
    async def find_team(self, team_id: str) -> SimpleNamespace:
        return SimpleNamespace(id=team_id, name="team-a-by-id")


def feedback(store: FakeStore, cache: FakeCache | None = None) -> tuple[Feedback, FakeCache, FakeLedger]:
    cache = cache or FakeCache()
    ledger = FakeLedger(store)
    return Feedback(store, cache, ledger, FakeKeys()), cache, ledger  # type: ignore[arg-type]


async def test_a_wrong_exact_hit_is_recorded_and_its_entry_purged() -> None:
    store = FakeStore(answered("exact"))
    fb, cache, _ = feedback(store, FakeCache(hit("exact")))
    reported = await fb.report(TEAM, "req_1", Verdict.WRONG, "stale price")
    assert (reported.recorded, reported.purged) == (Recorded.NEW, True)
    assert cache.removed == [hit("exact")]
    assert cache.false_hits == {("team-a", "exact"): 1}
    (row,) = store.rows
    assert (row.request, row.verdict, row.reported_by, row.comment, row.pair) == (
        answered("exact"),
        Verdict.WRONG,
        "key_a1",
        "stale price",
        None,  # an exact hit has no pair of questions
    )


async def test_the_same_verdict_twice_purges_once() -> None:
    fb, cache, _ = feedback(FakeStore(answered("exact")), FakeCache(hit("exact")))
    first = await fb.report(TEAM, "req_1", Verdict.WRONG, "stale price")
    again = await fb.report(TEAM, "req_1", Verdict.WRONG, None)
    assert (again.recorded, again.purged) == (Recorded.SAME, False)
    assert (again.row.comment, again.row.updated_at) == ("stale price", first.row.updated_at)  # as stored
    assert len(cache.removed) == 1 and cache.false_hits == {("team-a", "exact"): 1}


@pytest.mark.parametrize("verdict, same", [(Verdict.WRONG, False), (Verdict.RIGHT, True)])
async def test_a_semantic_hit_keeps_its_pair_labelled_by_the_verdict(verdict: Verdict, same: bool) -> None:
    store = FakeStore(answered("semantic"))
    served = hit("semantic", query="price of tea?", stored="how much is tea?", cosine=0.93)
    fb, cache, _ = feedback(store, FakeCache(served))
    reported = await fb.report(TEAM, "req_1", verdict, None)
    assert store.rows[0].pair == Labelled("price of tea?", "how much is tea?", same)
    assert reported.purged is (verdict is Verdict.WRONG)
    assert cache.removed == ([served] if verdict is Verdict.WRONG else [])


async def test_a_wrong_answer_from_the_upstream_purges_nothing() -> None:
    fb, cache, _ = feedback(FakeStore(answered("miss")), FakeCache(hit("exact")))
    reported = await fb.report(TEAM, "req_1", Verdict.WRONG, None)
    assert (reported.recorded, reported.purged) == (Recorded.NEW, False)
    assert cache.removed == [] and cache.false_hits == {}


async def test_another_teams_served_hit_is_not_purged() -> None:
    fb, cache, _ = feedback(FakeStore(answered("exact")), FakeCache(hit("exact", team_id="team_b1")))
    reported = await fb.report(TEAM, "req_1", Verdict.WRONG, None)
    assert reported.purged is False and cache.removed == []
    assert cache.false_hits == {("team-a", "exact"): 1}  # still a false hit the team reported


async def test_the_admin_reports_any_teams_request_and_the_metric_names_the_team() -> None:
    fb, cache, _ = feedback(FakeStore(answered("exact", team_id="team_b1")), FakeCache(hit("exact", team_id="team_b1")))
    reported = await fb.report(Reporter(ADMIN, None), "req_1", Verdict.WRONG, None)
    assert reported.purged is True and reported.row.reported_by == ADMIN
    assert cache.false_hits == {("team-a-by-id", "exact"): 1}  # the team's name from the key store


@pytest.mark.parametrize("stored, flushes", [(answered(team_id="team_b1"), 0), (None, 1)])  # another team's, none
async def test_a_request_the_reporter_may_not_see_is_not_found(stored: AnsweredRequest | None, flushes: int) -> None:
    store = FakeStore(*([stored] if stored else []))
    fb, _, ledger = feedback(store)
    with pytest.raises(NotFound) as err:
        await fb.report(TEAM, "req_1", Verdict.WRONG, None)
    assert err.value.code == "request_not_found" and err.value.param == "request_id"
    assert store.rows == [] and ledger.flushes == flushes  # a missing row: its own queue written first


async def test_a_row_still_queued_in_the_ledger_is_flushed_and_found() -> None:
    store = FakeStore(after_flush=answered())
    fb, _, ledger = feedback(store)
    reported = await fb.report(TEAM, "req_1", Verdict.RIGHT, None)
    assert reported.recorded is Recorded.NEW and ledger.flushes == 1


async def test_a_database_failure_is_a_503_to_retry() -> None:
    store = FakeStore(answered())
    store.fail = True
    fb, _, _ = feedback(store)
    with pytest.raises(Unavailable) as err:
        await fb.report(TEAM, "req_1", Verdict.WRONG, None)
    assert err.value.status == 503 and err.value.retry_after == 1
