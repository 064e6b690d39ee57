"""An in-process nearest-neighbour index over unit vectors (cosine = dot product).

Small indexes are searched exhaustively. Past `IVF_MIN` vectors the index becomes an inverted
file: k-means centroids split the vectors into lists kept as contiguous float32 blocks, and a
query scans only the `nprobe` lists whose centroids are closest — 20 of ~4 sqrt(n) lists,
a few percent of the vectors at 100k. The cache only serves very close neighbours (cosine ~0.85
and up), and those share a centroid with the query almost always, so the approximation costs next
to nothing where it matters. Centroids are re-trained each time the index doubles, on a worker
thread (`bench/semantic_cache_index.py --doubling` times the add that starts it): the index keeps
answering from its old lists meanwhile, and what was added or removed meanwhile is carried over
when the new lists are swapped in.

`bench/semantic_cache_index.py` measures the trade at 100k stored questions: of the QQP dev
pairs at MiniLM cosine >= 0.93 whose stored question an exhaustive static search puts among the
candidates, the share the index finds, and the time a search takes, at a few list counts and
`nprobe`s. 4 sqrt(n) lists with 20 probed found 99.9% of them, sqrt(n) lists with 16 99.3%, in
0.63 of the time (245 against 386 us on an AVX2 core); training takes ~0.5 s longer at 100k
(2.3 s), once a doubling.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

IVF_MIN = 4096
NPROBE = 20
LISTS_PER_ROOT = 4  # lists = LISTS_PER_ROOT x sqrt(vectors)
KMEANS_SAMPLE = 16_384
KMEANS_ROUNDS = 8
ASSIGN_CHUNK = 8192  # vectors assigned to their lists at a time: 100k x 1,264 scores would take 0.5 GB

log = logging.getLogger("costgate.cache")
_TRAINER = ThreadPoolExecutor(1, thread_name_prefix="ivf-train")  # numpy's products release the GIL


class _Block:
    """One list's vectors, contiguous, with spare capacity; removal swaps in the last row.
    Capacity grows by a quarter (not doubling): spare rows are most of the index's memory beyond
    the 512 bytes a vector (bench/cache_memory.py), and a copy a quarter of the adds is cheap."""

    def __init__(self, dim: int) -> None:
        self.vectors = np.zeros((16, dim), dtype=np.float32)
        self.keys: list[str] = []

    @classmethod
    def of(cls, keys: list[str], vectors: np.ndarray) -> _Block:
        block = cls(vectors.shape[1])
        block.vectors = np.zeros((max(16, len(keys) * 5 // 4), vectors.shape[1]), dtype=np.float32)
        block.vectors[: len(keys)] = vectors
        block.keys = keys
        return block

    def add(self, key: str, vector: np.ndarray) -> int:
        n = len(self.keys)
        if n == len(self.vectors):
            grown = np.zeros((n + max(16, n // 4), self.vectors.shape[1]), dtype=np.float32)
            grown[:n] = self.vectors
            self.vectors = grown
        self.vectors[n] = vector
        self.keys.append(key)
        return n

    def remove(self, row: int) -> str | None:
        """Remove `row`; returns the key that moved into it (None when it was the last)."""
        last = len(self.keys) - 1
        moved = None
        if row != last:
            self.vectors[row] = self.vectors[last]
            self.keys[row] = self.keys[last]
            moved = self.keys[row]
        self.keys.pop()
        return moved

    def scores(self, query: np.ndarray) -> np.ndarray:
        return self.vectors[: len(self.keys)] @ query


def kmeans(vectors: np.ndarray, k: int, rounds: int = KMEANS_ROUNDS, seed: int = 0) -> np.ndarray:
    """Spherical k-means: unit centroids that maximise the summed cosine of their members."""
    rng = np.random.default_rng(seed)
    centroids = vectors[rng.choice(len(vectors), size=k, replace=False)].copy()
    for _ in range(rounds):
        assign = np.argmax(vectors @ centroids.T, axis=1)
        sums = np.zeros_like(centroids)
        np.add.at(sums, assign, vectors)
        norms = np.linalg.norm(sums, axis=1, keepdims=True)
        empty = norms[:, 0] == 0
        sums[empty] = vectors[rng.choice(len(vectors), size=int(empty.sum()), replace=False)]
        norms[empty] = 1.0
        centroids = (sums / norms).astype(np.float32)
    return centroids


def nearest(vectors: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """Each vector's nearest centroid, a chunk of vectors at a time."""
    chunks = range(0, len(vectors), ASSIGN_CHUNK)
    return np.concatenate([np.argmax(vectors[i : i + ASSIGN_CHUNK] @ centroids.T, axis=1) for i in chunks])


class _Lists:
    """The index's contents at one training: centroids, one block a list, and where each key is."""

    def __init__(self, centroids: np.ndarray, blocks: list[_Block]) -> None:
        self.centroids = centroids
        self.blocks = blocks
        self.where = {key: (b, row) for b, block in enumerate(blocks) for row, key in enumerate(block.keys)}

    @classmethod
    def exhaustive(cls, dim: int) -> _Lists:
        return cls(np.zeros((1, dim), dtype=np.float32), [_Block(dim)])

    @classmethod
    def trained(cls, keys: list[str], vectors: np.ndarray, lists_per_root: float) -> _Lists:
        """k-means over (a sample of) the vectors, then every vector into its nearest list."""
        sample = (
            vectors
            if len(vectors) <= KMEANS_SAMPLE
            else vectors[np.random.default_rng(len(vectors)).choice(len(vectors), KMEANS_SAMPLE, replace=False)]
        )
        lists = max(16, int(lists_per_root * np.sqrt(len(vectors))))
        centroids = kmeans(sample, lists)
        assign = nearest(vectors, centroids)
        order = np.argsort(assign, kind="stable")
        bounds = np.r_[0, np.cumsum(np.bincount(assign, minlength=lists))]
        blocks = [
            _Block.of([keys[r] for r in order[a:b]], vectors[order[a:b]]) for a, b in zip(bounds[:-1], bounds[1:])
        ]
        return cls(centroids, blocks)

    def add(self, key: str, vector: np.ndarray) -> None:
        if key in self.where:
            self.remove(key)
        block = 0 if len(self.blocks) == 1 else int(np.argmax(self.centroids @ vector))
        self.where[key] = (block, self.blocks[block].add(key, vector))

    def extend(self, keys: list[str], vectors: np.ndarray) -> None:
        """Add keys not in the lists, each to its nearest list (one product for them all)."""
        if not keys:
            return
        for key, vector, block in zip(keys, vectors, nearest(vectors, self.centroids)):
            self.where[key] = (int(block), self.blocks[int(block)].add(key, vector))

    def remove(self, key: str) -> bool:
        place = self.where.pop(key, None)
        if place is None:
            return False
        block, row = place
        moved = self.blocks[block].remove(row)
        if moved is not None:
            self.where[moved] = (block, row)
        return True

    def vector(self, key: str) -> np.ndarray:
        block, row = self.where[key]
        return self.blocks[block].vectors[row]

    def snapshot(self) -> tuple[list[str], np.ndarray]:
        """Every key and its vector (copied), for a training that runs while this goes on changing."""
        keys = [key for block in self.blocks for key in block.keys]
        return keys, np.concatenate([block.vectors[: len(block.keys)] for block in self.blocks])


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
        self._lists = _Lists.exhaustive(dim)  # one list: exhaustive search
        self._trained_at = 0  # the size of the last training (started)
        self._training: Future[_Lists] | None = None
        self._touched: set[str] = set()  # keys added or removed while a training runs

    def __len__(self) -> int:
        return len(self._lists.where)

    def __contains__(self, key: str) -> bool:
        return key in self._lists.where

    @property
    def blocks(self) -> list[_Block]:
        return self._lists.blocks

    def add(self, key: str, vector: np.ndarray) -> None:
        self._adopt()
        self._lists.add(key, np.asarray(vector, dtype=np.float32))
        if self._training is not None:
            self._touched.add(key)
        if len(self) >= self.ivf_min and len(self) >= 2 * self._trained_at:
            self._train()

    def add_many(self, keys: list[str], vectors: np.ndarray) -> None:
        """Bulk load (a snapshot, a replica's start): one training, in this call, instead of one
        per doubling."""
        self._adopt()
        if len(self.blocks) > 1 or self._training is not None or any(k in self for k in keys):
            for key, vector in zip(keys, vectors):
                self.add(key, vector)
            return
        for key, vector in zip(keys, np.asarray(vectors, dtype=np.float32)):
            self._lists.add(key, vector)  # one list yet: no training until all are in
        if len(self) >= self.ivf_min:
            self._train(background=False)

    def remove(self, key: str) -> bool:
        self._adopt()
        if self._training is not None:
            self._touched.add(key)
        return self._lists.remove(key)

    def search(self, query: np.ndarray, k: int = 1, floor: float = -np.inf) -> list[tuple[str, float]]:
        """Up to k (key, cosine) pairs with cosine >= `floor`, best first."""
        self._adopt()
        lists, query = self._lists, np.asarray(query, dtype=np.float32)
        if len(lists.blocks) == 1:
            probe = [0]
        else:
            near = lists.centroids @ query
            probe = np.argpartition(-near, min(self.nprobe, len(near)) - 1)[: self.nprobe].tolist()
        blocks = [lists.blocks[b] for b in probe if lists.blocks[b].keys]
        if not blocks:
            return []
        # One comparison and one selection over the probed lists' scores together: per list,
        # the few numpy calls cost more than the products themselves at ~100 rows a list.
        scores = np.concatenate([block.scores(query) for block in blocks])
        over = np.flatnonzero(scores >= floor)  # most questions have none over a cache's floor
        if len(over) > k:
            over = over[np.argpartition(-scores[over], k - 1)[:k]]
        starts = np.cumsum([0] + [len(block.keys) for block in blocks])
        found = []
        for row in over.tolist():
            b = int(np.searchsorted(starts, row, side="right")) - 1
            found.append((blocks[b].keys[row - starts[b]], float(scores[row])))
        found.sort(key=lambda item: -item[1])
        return found

    def settle(self) -> None:
        """Wait for a training in flight and swap its lists in (benchmarks, tests, shutdown)."""
        if self._training is not None:
            self._training.exception()  # waits; a failure is logged by `_adopt`
            self._adopt()

    def items(self) -> list[tuple[str, np.ndarray]]:
        return [(k, self._lists.vector(k)) for k in self._lists.where]

    def _train(self, background: bool | None = None) -> None:
        if self._training is not None:
            return  # one at a time; the next doubling is checked once this one is in
        keys, vectors = self._lists.snapshot()
        self._trained_at = len(keys)
        if not (self.background if background is None else background):
            self._lists = _Lists.trained(keys, vectors, self.lists_per_root)
            return
        self._touched = set()
        self._training = _TRAINER.submit(_Lists.trained, keys, vectors, self.lists_per_root)

    def _adopt(self) -> None:
        """Swap in the lists a finished training made, with the keys added or removed meanwhile."""
        if self._training is None or not self._training.done():
            return
        training, touched = self._training, self._touched
        self._training, self._touched = None, set()
        try:
            trained = training.result()
        except Exception:  # the old lists still answer; the next doubling tries again
            log.exception("the semantic cache's index could not re-train its lists")
            return
        for key in touched:
            trained.remove(key)
        live = [key for key in touched if key in self._lists.where]
        trained.extend(live, np.array([self._lists.vector(key) for key in live]))
        self._lists = trained
