"""Where cached answers live: the entry, the backend protocol, and the embedded backend.

Both caches share one store: an entry is found by its exact request key, or — semantically —
by its question's vector within its namespace. TTL, the size limit and purges apply to both.

Eviction keeps the entries most worth keeping: the lowest `keep_score` goes first, which is
the last use plus an hour for every doubling of its hits (so an answer hit a thousand times
outlives one used once a few hours later).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from policies.exact_cache import CachedAnswer
from policies.semantic_cache.embedder import DIM
from policies.semantic_cache.index import VectorIndex

HIT_WEIGHT_S = 3600.0
EVICT_FRACTION = 0.01  # evict in batches: a full cache stays full without sorting per insert


def keep_score(last_used: float, hits: int) -> float:
    return last_used + HIT_WEIGHT_S * math.log2(1 + hits)


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


class CacheStore(Protocol):
    """A backend. `vector` is None for entries stored while the semantic cache was off."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def get(self, key: str, now: float) -> Entry | None: ...

    async def nearest(self, namespace: str, vector: np.ndarray, now: float, k: int = 1) -> list[tuple[Entry, float]]:
        ...

    async def put(self, entry: Entry, vector: np.ndarray | None) -> None: ...

    async def record_hit(self, entry: Entry, now: float) -> None: ...

    async def purge(self, team_id: str | None) -> int: ...

    async def count(self) -> int: ...


class EmbeddedStore:
    """In-process: entries in a dict, one vector index per namespace, a snapshot on disk
    (written on stop and by `save`; read on start)."""

    def __init__(self, max_entries: int, path: Path | None = None) -> None:
        self.max_entries = max_entries
        self.path = path
        self.entries: dict[str, Entry] = {}
        self.indexes: dict[str, VectorIndex] = {}

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

    async def nearest(self, namespace: str, vector: np.ndarray, now: float, k: int = 1) -> list[tuple[Entry, float]]:
        index = self.indexes.get(namespace)
        if index is None:
            return []
        found = []
        for key, score in index.search(vector, k):
            entry = await self.get(key, now)
            if entry is not None:
                found.append((entry, score))
        return found

    async def put(self, entry: Entry, vector: np.ndarray | None) -> None:
        self._remove(entry.key)
        self.entries[entry.key] = entry
        if vector is not None:
            self.indexes.setdefault(entry.namespace, VectorIndex(DIM)).add(entry.key, vector)
        if len(self.entries) > self.max_entries:
            self._evict(max(1, len(self.entries) - self.max_entries, int(self.max_entries * EVICT_FRACTION)))

    async def record_hit(self, entry: Entry, now: float) -> None:
        entry.hits += 1
        entry.last_used = now

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
        index = self.indexes.get(entry.namespace)
        if index is not None:
            index.remove(key)
            if not len(index):
                del self.indexes[entry.namespace]

    def _evict(self, n: int) -> None:
        keys = list(self.entries)
        scores = np.array([keep_score(e.last_used, e.hits) for e in self.entries.values()])
        for i in np.argpartition(scores, min(n, len(keys)) - 1)[:n]:
            self._remove(keys[i])

    def save(self, path: Path) -> None:
        """Atomically: entries as JSON lines, vectors as one .npy in the same order."""
        path.mkdir(parents=True, exist_ok=True)
        vectors: dict[str, np.ndarray] = {}
        for index in self.indexes.values():
            vectors.update(index.items())
        keys = list(self.entries)
        with_vector = np.array([k in vectors for k in keys], dtype=bool)
        matrix = np.stack([vectors[k] for k in keys if k in vectors]) if vectors else np.zeros((0, DIM), np.float32)
        tmp_entries, tmp_vectors = path / "entries.jsonl.tmp", path / "vectors.npz.tmp"
        with open(tmp_entries, "w") as f:
            for key in keys:
                f.write(json.dumps(self.entries[key].to_json()) + "\n")
        with open(tmp_vectors, "wb") as f:
            np.savez(f, vectors=matrix.astype(np.float32), with_vector=with_vector)
        os.replace(tmp_vectors, path / "vectors.npz")
        os.replace(tmp_entries, path / "entries.jsonl")

    def load(self, path: Path) -> None:
        with np.load(path / "vectors.npz") as data:
            matrix, with_vector = data["vectors"], data["with_vector"]
        rows: dict[str, tuple[list[str], list[int]]] = {}
        row = 0
        with open(path / "entries.jsonl") as f:
            for i, line in enumerate(f):
                entry = Entry.from_json(json.loads(line))
                self.entries[entry.key] = entry
                if i < len(with_vector) and with_vector[i]:
                    keys, positions = rows.setdefault(entry.namespace, ([], []))
                    keys.append(entry.key)
                    positions.append(row)
                    row += 1
        for namespace, (keys, positions) in rows.items():
            self.indexes.setdefault(namespace, VectorIndex(DIM)).add_many(keys, matrix[positions])
