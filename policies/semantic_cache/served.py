"""What a cache hit served, kept by request id for a while so that feedback can find it.

A report that a hit was wrong (POST /v1/feedback) names only the request id. The ledger knows the
request's team and cache status, not which entry answered nor what was asked; this record does:
the entry (to purge exactly that one, not a newer answer stored under the same key since) and,
for a semantic hit, the pair of questions the verifier matched (to keep as the team's label).

It holds no text the cache would not hold anyway: an exact hit's record holds none (the question
is the entry's own); a semantic hit's holds the stored question and the question asked — what
the cache stores for any miss — and none when the request said `no-store`. It expires after
the feedback window (`cache.feedback_window`), never later than the team's cache TTL.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class ServedHit:
    request_id: str
    team_id: str
    kind: str  # exact | semantic
    entry_key: str
    entry_created_at: float  # tells the entry that answered from one stored under its key later
    expires_at: float
    query: str | None = None  # semantic hits: the question asked (None under no-store)
    stored: str | None = None  # semantic hits: the stored question whose answer was served
    cosine: float | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ServedHit:
        return cls(**data)


class ServedHits:
    """The embedded backend's records: in process, at most `limit` of them (the oldest go first)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._hits: OrderedDict[str, ServedHit] = OrderedDict()

    def add(self, hit: ServedHit) -> None:
        self._hits[hit.request_id] = hit
        while len(self._hits) > self.limit:
            self._hits.popitem(last=False)

    def get(self, request_id: str, now: float) -> ServedHit | None:
        hit = self._hits.get(request_id)
        if hit is not None and hit.expires_at <= now:
            del self._hits[request_id]
            return None
        return hit
