"""The semantic cache's nearest-neighbour index over unit vectors (cosine = inner product), on FAISS.

Small indexes are searched exhaustively (`IndexFlatIP`). Past `IVF_MIN` vectors the index
becomes an inverted file (`IndexIVFFlat`): spherical k-means centroids split the vectors into
lists, and a query scans only the `nprobe` lists whose centroids are closest — 20 of ~4 sqrt(n)
lists, a few percent of the vectors at 100k. The cache only serves very close neighbours (cosine
~0.85 and up), and those share a centroid with the query almost always, so the approximation
costs little where it matters (`bench/semantic_cache_index.py` at 100k: 99.5-99.7% of the close
QQP pairs found, across k-means seeds; `bench/semantic_cache_speed.py --recall-only`: 0 of 234
hits lost at the default bound).

What FAISS does not do is the cache's: string keys (to FAISS's int64 ids and back), and
re-training each time the index doubles on a worker thread while the old lists keep answering;
what was added or removed meanwhile is carried over when the new lists are swapped in. FAISS
releases the GIL in its calls, and runs on one OpenMP thread here: one query at a time is what
the gateway asks, and a training on the worker thread should not take the event loop's core.

It replaced a hand-written inverted file of the same design (issue 25): 0.71x its search time at
100k, 99.5% of the close pairs against its 99.9%, 1,993 against 2,019 bytes of replica memory a
cached question (docs/benchmarks.md, each with its command).
"""

from __future__ import annotations

import functools
import logging
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

IVF_MIN = 4096
NPROBE = 20
LISTS_PER_ROOT = 4  # lists = LISTS_PER_ROOT x sqrt(vectors)
KMEANS_SAMPLE = 16_384
KMEANS_ROUNDS = 8

log = logging.getLogger("costgate.cache")
_TRAINER = ThreadPoolExecutor(1, thread_name_prefix="ivf-train")


@functools.cache
def _faiss() -> Any:
    """FAISS, imported when the first index is built: a gateway whose cache holds no question
    vectors (the semantic cache off) starts without it (bench/serve_start.py). faiss-cpu's stubs
    type its SWIG layer, not the numpy wrappers its Python layer puts over it (remove_ids,
    search, add_with_ids take arrays): read as untyped."""
    import faiss

    faiss.omp_set_num_threads(1)
    return faiss


def kmeans(vectors: np.ndarray, k: int, rounds: int = KMEANS_ROUNDS, seed: int = 0) -> np.ndarray:
    """Spherical k-means: unit centroids that maximise the summed cosine of their members."""
    clustering = _faiss().Kmeans(vectors.shape[1], k, niter=rounds, seed=seed, spherical=True, verbose=False)
    clustering.cp.min_points_per_centroid = 1  # ~sqrt(n)/4 points a list is the design, not a mistake to warn of
    clustering.train(np.ascontiguousarray(vectors, dtype=np.float32))
    return np.asarray(clustering.centroids, dtype=np.float32)


def _exhaustive(dim: int) -> Any:  # a faiss.Index
    faiss = _faiss()
    return faiss.IndexIDMap2(faiss.IndexFlatIP(dim))


def _inverted(ids: np.ndarray, vectors: np.ndarray, lists_per_root: float, nprobe: int) -> Any:  # a faiss.Index
    """k-means over (a sample of) the vectors, then every vector into its nearest list."""
    faiss = _faiss()
    sample = (
        vectors
        if len(vectors) <= KMEANS_SAMPLE
        else vectors[np.random.default_rng(len(vectors)).choice(len(vectors), KMEANS_SAMPLE, replace=False)]
    )
    lists = max(16, int(lists_per_root * np.sqrt(len(vectors))))
    quantizer = faiss.IndexFlatIP(vectors.shape[1])
    quantizer.add(kmeans(sample, lists))
    index = faiss.IndexIVFFlat(quantizer, vectors.shape[1], lists, faiss.METRIC_INNER_PRODUCT)
    index.is_trained = True  # the centroids are the quantizer's
    index.set_direct_map_type(faiss.DirectMap.Hashtable)  # removal and lookup by id without a scan
    index.add_with_ids(vectors, ids)
    index.nprobe = nprobe
    return index  # FAISS's Python layer keeps the quantizer alive with it


@dataclass
class _Training:
    """A training in flight: its result, and the keys added or removed since its snapshot."""

    future: Future[Any]  # a faiss.Index
    ids: dict[str, int]  # the snapshot's key -> id
    touched: set[str] = field(default_factory=set)


class VectorIndex:
    def __init__(
        self,
        dim: int,
        ivf_min: int = IVF_MIN,
        nprobe: int = NPROBE,
        lists_per_root: float = LISTS_PER_ROOT,
        background: bool = True,
    ) -> None:
        self.dim = dim
        self.ivf_min = ivf_min
        self.nprobe = nprobe
        self.lists_per_root = lists_per_root
        self.background = background  # train on the worker thread (False: in the call that triggers it)
        self._index = _exhaustive(dim)
        self._ids: dict[str, int] = {}
        self._keys: dict[int, str] = {}
        self._next_id = 0
        self._trained_at = 0  # the size of the last training (started)
        self._training: _Training | None = None

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, key: str) -> bool:
        return key in self._ids

    @property
    def lists(self) -> int:
        """How many lists a search chooses among: 1 while the index is exhaustive."""
        return int(self._index.nlist) if isinstance(self._index, _faiss().IndexIVFFlat) else 1

    def add(self, key: str, vector: np.ndarray) -> None:
        self._adopt()
        self._put([key], np.asarray(vector, dtype=np.float32).reshape(1, self.dim))
        if len(self) >= self.ivf_min and len(self) >= 2 * self._trained_at:
            self._train()

    def add_many(self, keys: list[str], vectors: np.ndarray) -> None:
        """Bulk load (a snapshot, a replica's start): one training, in this call, instead of one
        per doubling."""
        self._adopt()
        if self.lists > 1 or self._training is not None or any(k in self for k in keys):
            for key, vector in zip(keys, vectors):
                self.add(key, vector)
            return
        self._put(list(keys), np.asarray(vectors, dtype=np.float32).reshape(len(keys), self.dim))
        if len(self) >= self.ivf_min:
            self._train(background=False)

    def remove(self, key: str) -> bool:
        self._adopt()
        found = self._ids.pop(key, None)
        if found is None:
            return False
        del self._keys[found]
        self._index.remove_ids(np.array([found], dtype=np.int64))
        if self._training is not None:
            self._training.touched.add(key)
        return True

    def search(self, query: np.ndarray, k: int = 1, floor: float = -np.inf) -> list[tuple[str, float]]:
        """Up to k (key, cosine) pairs with cosine >= `floor`, best first."""
        self._adopt()
        if not self._ids:
            return []
        scores, ids = self._index.search(np.asarray(query, dtype=np.float32).reshape(1, self.dim), k)
        return [(self._keys[int(i)], float(s)) for s, i in zip(scores[0], ids[0]) if i >= 0 and s >= floor]

    def settle(self) -> None:
        """Wait for a training in flight and swap its lists in (benchmarks, tests, shutdown)."""
        if self._training is not None:
            self._training.future.exception()  # waits; a failure is logged by `_adopt`
            self._adopt()

    def items(self) -> list[tuple[str, np.ndarray]]:
        keys = list(self._ids)
        vectors = self._vectors([self._ids[k] for k in keys])
        return list(zip(keys, vectors))

    def _put(self, keys: list[str], vectors: np.ndarray) -> None:
        """Add or replace: a key already in keeps its id, with its new vector."""
        again = [self._ids[k] for k in keys if k in self._ids]
        if again:
            self._index.remove_ids(np.array(again, dtype=np.int64))
        ids = np.empty(len(keys), dtype=np.int64)
        for n, key in enumerate(keys):
            found = self._ids.get(key)
            if found is None:
                found = self._ids[key] = self._next_id
                self._keys[found] = key
                self._next_id += 1
            ids[n] = found
        self._index.add_with_ids(vectors, ids)
        if self._training is not None:
            self._training.touched.update(keys)

    def _vectors(self, ids: list[int]) -> np.ndarray:
        if not ids:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self._index.reconstruct_batch(np.array(ids, dtype=np.int64))

    def _train(self, background: bool | None = None) -> None:
        if self._training is not None:
            return  # one at a time; the next doubling is checked once this one is in
        snapshot = dict(self._ids)
        ids = np.fromiter(snapshot.values(), dtype=np.int64, count=len(snapshot))
        vectors = self._vectors(ids.tolist())
        self._trained_at = len(ids)
        if not (self.background if background is None else background):
            self._index = _inverted(ids, vectors, self.lists_per_root, self.nprobe)
            return
        self._training = _Training(_TRAINER.submit(_inverted, ids, vectors, self.lists_per_root, self.nprobe), snapshot)

    def _adopt(self) -> None:
        """Swap in the lists a finished training made, with the keys added or removed meanwhile."""
        training = self._training
        if training is None or not training.future.done():
            return
        self._training = None
        try:
            trained = training.future.result()
        except Exception:  # the old lists still answer; the next doubling tries again
            log.exception("the semantic cache's index could not re-train its lists")
            return
        stale = [training.ids[key] for key in training.touched if key in training.ids]
        if stale:
            trained.remove_ids(np.array(stale, dtype=np.int64))
        live = [key for key in training.touched if key in self._ids]
        if live:
            ids = [self._ids[key] for key in live]
            trained.add_with_ids(self._vectors(ids), np.array(ids, dtype=np.int64))
        self._index = trained
