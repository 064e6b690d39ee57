"""What the semantic cache's tests share: a stored entry made to order."""

from __future__ import annotations

from policies.exact_cache import CachedAnswer
from policies.semantic_cache.store import Entry


def entry(
    key: str,
    team: str = "t",
    ns: str = "ns",
    expires: float = 1e12,
    hits: int = 0,
    last_used: float = 0.0,
    question: str | None = None,
) -> Entry:
    answer = CachedAnswer("answer " + key, "stop", "m", "small", 3, 4)
    return Entry(key, team, ns, question or "question " + key, answer, 0.0, expires, hits, last_used)
