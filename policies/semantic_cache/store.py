"""Where cached answers live: the entry, the backend protocol, and the embedded backend.

Both caches share one store: an entry is found by its exact request key, or — semantically —
by its question's vectors within its namespace: the static vector (`static_embedder`) finds
candidates in an index, and the MiniLM vector, kept once some lookup computed it, re-ranks
them. TTL, the size limit and purges apply to both.

Eviction takes room from the teams that hold the most first (`fair_eviction`): one team
filling the cache with new questions evicts its own entries once it holds more than another,
never the other's, so no team's traffic can raise another's bill by emptying its cache. Within
a team the entries most worth keeping stay: the lowest `keep_score` goes first, which is the last
use plus an hour for every doubling of its hits (so an answer hit a thousand times outlives one
used once a few hours later).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from policies.exact_cache import CachedAnswer
from policies.semantic_cache.index import VectorIndex
from policies.semantic_cache.served import ServedHit, ServedHits
from policies.semantic_cache.static_embedder import StaticEmbedder

HIT_WEIGHT_S = 3600.0
EVICT_FRACTION = 0.01  # evict in batches: a full cache stays full without sorting per insert


def keep_score(last_used: float, hits: int) -> float:
    return last_used + HIT_WEIGHT_S * math.log2(1 + hits)


def fair_eviction(sizes: Mapping[str, int], n: int) -> dict[str, int]:
    """How many entries each team gives up for `n` to go: taken from the largest holdings down
    to a common level, so a team never loses an entry while another holds more than it (ties
    share, in team order). At most what the teams hold."""
    held = dict(sizes)
    taken = dict.fromkeys(held, 0)
    remaining = min(n, sum(held.values()))
    while remaining > 0:
        top = max(held.values())
        leaders = sorted(t for t, size in held.items() if size == top)
        below = max((size for size in held.values() if size < top), default=0)
        step = min(top - below, remaining // len(leaders))  # each leader down to the next level, or less
        for team in leaders if step else leaders[:remaining]:  # fewer left than leaders: one each
            take = step or 1
            held[team] -= take
            taken[team] += take
            remaining -= take
    return {team: count for team, count in taken.items() if count}


@dataclass(slots=True)
class Entry:
    key: str
    team_id: str
    namespace: str
    question: str
    answer: CachedAnswer
    created_at: float
    expires_at: float
    hits: int = 0
    last_used: float = 0.0

    def to_json(self) -> dict:
        data = asdict(self)
        data["answer"] = asdict(self.answer)
        return data

    @classmethod
    def from_json(cls, data: dict) -> Entry:
        return cls(**{**data, "answer": CachedAnswer(**data["answer"])})


@dataclass(slots=True)
class QuestionVectors:
    """A question's vectors: the static one always, MiniLM's (`full`) once a lookup needed it
    (then it is kept with the entry, so no question is run through MiniLM twice)."""

    static: np.ndarray
    full: np.ndarray | None = None


@dataclass(frozen=True, slots=True)
class Candidate:
    entry: Entry
    static_cosine: float
    full: np.ndarray | None  # the stored question's MiniLM vector, when some lookup made it


class CacheStore(Protocol):
    """A backend. `vectors` is None for entries stored while the semantic cache was off."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def get(self, key: str, now: float) -> Entry | None: ...

    async def candidates(
        self, namespace: str, static: np.ndarray, now: float, k: int, floor: float = -1.0
    ) -> list[Candidate]:
        """Up to k live entries of the namespace nearest by static cosine, best first, none
        under `floor` (then, for most new questions, no entry is read at all)."""
        ...

    async def put(self, entry: Entry, vectors: QuestionVectors | None) -> int:
        """Store (or replace) an entry; the entry count after it, as `count` would say."""
        ...

    async def remember_full(self, entry: Entry, full: np.ndarray) -> None:
        """Keep a stored question's MiniLM vector, computed when it first became a candidate."""
        ...

    async def record_hit(self, entry: Entry, now: float, served: ServedHit | None = None) -> None:
        """Count a hit; keep what it served (`served`), for feedback to find by request id."""
        ...

    async def served(self, request_id: str, now: float) -> ServedHit | None: ...

    async def remove(self, key: str, team_id: str, created_at: float) -> bool:
        """Remove one entry — only the team's, and only the one stored at `created_at` (not an
        answer stored under the same key since); whether it was there."""
        ...

    async def purge(self, team_id: str | None) -> int: ...

    async def count(self) -> int: ...


class EmbeddedStore:
    """In-process: entries in a dict, one static-vector index per namespace, the MiniLM vectors
    known so far in another dict, a snapshot on disk (written on stop and by `save`; read on
    start)."""

    def __init__(self, max_entries: int, path: Path | None = None) -> None:
        self.max_entries = max_entries
        self.path = path
        self.entries: dict[str, Entry] = {}
        self.indexes: dict[str, VectorIndex] = {}
        self.full: dict[str, np.ndarray] = {}
        self.served_hits = ServedHits(max_entries)  # not in the snapshot: a restart forgets them

    async def start(self) -> None:
        if self.path is not None and (self.path / "entries.jsonl").exists():
            self.load(self.path)

    async def stop(self) -> None:
        if self.path is not None and (self.entries or (self.path / "entries.jsonl").exists()):
            self.save(self.path)

    async def get(self, key: str, now: float) -> Entry | None:
        entry = self.entries.get(key)
        if entry is not None and entry.expires_at <= now:
            self._remove(key)
            return None
        return entry

    async def candidates(
        self, namespace: str, static: np.ndarray, now: float, k: int, floor: float = -1.0
    ) -> list[Candidate]:
        index = self.indexes.get(namespace)
        if index is None:
            return []
        found = []
        for key, score in index.search(static, k, floor):
            entry = await self.get(key, now)
            if entry is not None:
                found.append(Candidate(entry, score, self.full.get(key)))
        return found

    async def put(self, entry: Entry, vectors: QuestionVectors | None) -> int:
        self._remove(entry.key)
        self.entries[entry.key] = entry
        if vectors is not None:
            index = self.indexes.get(entry.namespace)
            if index is None:  # not setdefault: it built an index (and a block) on every put
                index = self.indexes[entry.namespace] = VectorIndex(len(vectors.static))
            index.add(entry.key, vectors.static)
            if vectors.full is not None:
                self.full[entry.key] = vectors.full
        if len(self.entries) > self.max_entries:
            self._evict(max(1, len(self.entries) - self.max_entries, int(self.max_entries * EVICT_FRACTION)))
        return len(self.entries)

    async def remember_full(self, entry: Entry, full: np.ndarray) -> None:
        if entry.key in self.entries:
            self.full[entry.key] = full

    async def record_hit(self, entry: Entry, now: float, served: ServedHit | None = None) -> None:
        entry.hits += 1
        entry.last_used = now
        if served is not None:
            self.served_hits.add(served)

    async def served(self, request_id: str, now: float) -> ServedHit | None:
        return self.served_hits.get(request_id, now)

    async def remove(self, key: str, team_id: str, created_at: float) -> bool:
        entry = self.entries.get(key)
        if entry is None or entry.team_id != team_id or entry.created_at != created_at:
            return False
        self._remove(key)
        return True

    async def purge(self, team_id: str | None) -> int:
        doomed = [k for k, e in self.entries.items() if team_id is None or e.team_id == team_id]
        for key in doomed:
            self._remove(key)
        return len(doomed)

    async def count(self) -> int:
        return len(self.entries)

    def _remove(self, key: str) -> None:
        entry = self.entries.pop(key, None)
        if entry is None:
            return
        self.full.pop(key, None)
        index = self.indexes.get(entry.namespace)
        if index is not None:
            index.remove(key)
            if not len(index):
                del self.indexes[entry.namespace]

    def _evict(self, n: int) -> None:
        by_team: dict[str, list[Entry]] = {}
        for entry in self.entries.values():
            by_team.setdefault(entry.team_id, []).append(entry)
        for team, count in fair_eviction({t: len(es) for t, es in by_team.items()}, n).items():
            entries = by_team[team]
            scores = np.array([keep_score(e.last_used, e.hits) for e in entries])
            for i in np.argpartition(scores, count - 1)[:count]:
                self._remove(entries[i].key)

    def save(self, path: Path) -> None:
        """Atomically: entries as JSON lines; static vectors, and the MiniLM vectors known, as
        matrices in the same order, with masks saying which entries have a row."""
        path.mkdir(parents=True, exist_ok=True)
        static: dict[str, np.ndarray] = {}
        for index in self.indexes.values():
            static.update(index.items())
        keys = list(self.entries)
        tmp_entries, tmp_vectors = path / "entries.jsonl.tmp", path / "vectors.npz.tmp"
        with open(tmp_entries, "w") as f:
            for key in keys:
                f.write(json.dumps(self.entries[key].to_json()) + "\n")
        with open(tmp_vectors, "wb") as f:
            np.savez(
                f,
                static=_rows(keys, static),
                with_static=np.array([k in static for k in keys], dtype=bool),
                full=_rows(keys, self.full),
                with_full=np.array([k in self.full for k in keys], dtype=bool),
            )
        os.replace(tmp_vectors, path / "vectors.npz")
        os.replace(tmp_entries, path / "entries.jsonl")

    def load(self, path: Path) -> None:
        entries = [Entry.from_json(json.loads(line)) for line in open(path / "entries.jsonl")]
        static, full = _load_vectors(path / "vectors.npz", entries)
        by_namespace: dict[str, tuple[list[str], list[np.ndarray]]] = {}
        for entry in entries:
            self.entries[entry.key] = entry
            if entry.key in full:
                self.full[entry.key] = full[entry.key]
            if entry.key in static:
                keys, vectors = by_namespace.setdefault(entry.namespace, ([], []))
                keys.append(entry.key)
                vectors.append(static[entry.key])
        for namespace, (keys, vectors) in by_namespace.items():
            self.indexes.setdefault(namespace, VectorIndex(len(vectors[0]))).add_many(keys, np.stack(vectors))


def _rows(keys: list[str], vectors: dict[str, np.ndarray]) -> np.ndarray:
    rows = [vectors[k] for k in keys if k in vectors]
    return np.stack(rows).astype(np.float32) if rows else np.zeros((0, 0), np.float32)


def _load_vectors(path: Path, entries: list[Entry]) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(static, full) by key. A snapshot from before the static stage holds MiniLM vectors
    only (`vectors`, `with_vector`): their static vectors are made again from the questions."""
    with np.load(path) as data:
        if "static" not in data.files:
            full = _by_key(entries, data["with_vector"], data["vectors"])
            embedder = StaticEmbedder.load()
            return {e.key: embedder.embed(e.question) for e in entries if e.key in full}, full
        return (
            _by_key(entries, data["with_static"], data["static"]),
            _by_key(entries, data["with_full"], data["full"]),
        )


def _by_key(entries: list[Entry], mask: np.ndarray, rows: np.ndarray) -> dict[str, np.ndarray]:
    keys = [e.key for e, has in zip(entries, mask) if has]
    return dict(zip(keys, rows))
