"""The semantic cache's IVF index against maintained libraries, on the same vectors.

    python bench/vector_index_libraries.py [qqp_dev.jsonl] [--fill 100000] [--churn 1000]

Issue 25 asked whether usearch or FAISS meet the figures of policies/semantic_cache/index.py's
hand-written inverted file; FAISS did, and the index is FAISS's IndexIVFFlat since (its first row
here is the cache's index as it is: FAISS behind string keys). The
store is bench/semantic_cache_index.py's (every `a` of the QQP dev pairs, fillers up to `--fill`,
static 128-d unit vectors, cosine = dot product); each index gets the same vectors and answers
the same searches (k candidates over the static floor, one query at a time as the cache asks):
- close pairs found / candidates found: as in bench/semantic_cache_index.py, against an
  exhaustive search of the same vectors;
- search: CPU per query on a stream of new questions, one thread, in alternating rounds, and its
  ratio to the cache's index in the same run;
- build: the bulk load's wall time (a snapshot, a replica's start); add / remove: CPU per call
  for `--churn` vectors added one at a time then removed by key (the cache adds on a miss and
  removes on expiry or eviction); memory per vector: the index's own figure (usearch's
  `memory_usage`, FAISS's serialized size (the cache's index too); none
  counts the cache's string-key map, which a library index would need as well: keys are ints).
Libraries run on one thread (the gateway's event loop searches inline; the machine is shared).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import faiss
import numpy as np
from usearch.index import Index

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.semantic_cache_stage import fillers, questions  # noqa: E402
from policies.semantic_cache.embedder import Embedder  # noqa: E402
from policies.semantic_cache.index import LISTS_PER_ROOT, NPROBE, VectorIndex  # noqa: E402
from policies.semantic_cache.static_embedder import StaticEmbedder  # noqa: E402
from policies.semantic_cache.verifier import Verifier  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
CLOSE = 0.93  # MiniLM cosine from which the verifier serves some pairs (docs/caching.md)
ROUNDS = 3


@dataclass
class Candidate:
    """One index behind the three calls the cache makes, with int keys."""

    name: str
    search: Callable[[np.ndarray, int, float], set[int]]  # query, k, floor -> keys over the floor
    add: Callable[[int, np.ndarray], None]
    remove: Callable[[int], None]
    bytes_used: Callable[[], int]


def cache_index(vectors: np.ndarray) -> Candidate:
    index = VectorIndex(vectors.shape[1])
    index.add_many([str(i) for i in range(len(vectors))], vectors)

    def size() -> int:
        return int(faiss.serialize_index(index._index).nbytes)

    return Candidate(
        f"the cache's index: FAISS IVFFlat behind string keys ({index.lists} lists, nprobe {NPROBE})",
        lambda q, k, floor: {int(key) for key, _ in index.search(q, k, floor)},
        lambda key, v: index.add(str(key), v),
        lambda key: index.remove(str(key)),
        size,
    )


def usearch_hnsw(vectors: np.ndarray, dtype: str) -> Candidate:
    index = Index(ndim=vectors.shape[1], metric="ip", dtype=dtype)
    index.add(np.arange(len(vectors)), vectors, threads=1)

    def search(q: np.ndarray, k: int, floor: float) -> set[int]:
        found = index.search(q, k, threads=1)
        return {int(key) for key, d in zip(found.keys, found.distances) if 1 - d >= floor}  # d = 1 - dot

    return Candidate(
        f"usearch HNSW {dtype} (M 16, ef 64)",
        search,
        lambda key, v: index.add(key, v, threads=1),
        lambda key: index.remove(key),
        lambda: int(index.memory_usage),
    )


def faiss_ivf(vectors: np.ndarray) -> Candidate:
    lists = int(LISTS_PER_ROOT * np.sqrt(len(vectors)))
    quantizer = faiss.IndexFlatIP(vectors.shape[1])
    index = faiss.IndexIVFFlat(quantizer, vectors.shape[1], lists, faiss.METRIC_INNER_PRODUCT)
    index.cp.niter = 8  # as the hand-written k-means
    index.train(vectors[np.random.default_rng(0).choice(len(vectors), min(len(vectors), 16_384), replace=False)])
    index.set_direct_map_type(faiss.DirectMap.Hashtable)  # removal by key without a scan of every list
    index.add_with_ids(vectors, np.arange(len(vectors), dtype=np.int64))
    index.nprobe = NPROBE
    return _faiss(f"FAISS IVFFlat ({lists} lists, nprobe {NPROBE})", index)


def faiss_hnsw(vectors: np.ndarray) -> Candidate:
    index = faiss.IndexHNSWFlat(vectors.shape[1], 32, faiss.METRIC_INNER_PRODUCT)
    index.add(vectors)  # ids are positions; HNSW cannot remove (remove_ids raises)
    return _faiss("FAISS HNSWFlat (M 32, ef 16; no removal)", index, removes=False)


def _faiss(name: str, index: faiss.Index, removes: bool = True) -> Candidate:
    def search(q: np.ndarray, k: int, floor: float) -> set[int]:
        scores, ids = index.search(q[None, :], k)
        return {int(i) for s, i in zip(scores[0], ids[0]) if i >= 0 and s >= floor}

    def add(key: int, v: np.ndarray) -> None:
        if removes:
            index.add_with_ids(v[None, :], np.array([key], dtype=np.int64))
        else:
            index.add(v[None, :])

    def remove(key: int) -> None:
        if removes:
            index.remove_ids(np.array([key], dtype=np.int64))

    return Candidate(name, search, add, remove, lambda: int(faiss.serialize_index(index).nbytes))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="?", type=Path, default=DATA / "qqp_dev.jsonl")
    parser.add_argument("--fill", type=int, default=100_000)
    parser.add_argument("--stream", type=int, default=2000, help="new questions timed")
    parser.add_argument("--churn", type=int, default=1000, help="vectors added then removed one at a time")
    args = parser.parse_args()
    faiss.omp_set_num_threads(1)

    rows = [json.loads(line) for line in args.data.read_text().splitlines()]
    texts = questions(args.data)
    stored = list(dict.fromkeys(r["a"] for r in rows))
    stored += fillers(texts[1::2], args.fill - len(stored), seed=1)
    static, verifier = StaticEmbedder.load(), Verifier.load()
    floor, k = static.gate_for(verifier.least_cosine_needed(0.05) or 1.0), static.candidates
    vectors = static.embed_many(stored)
    asked = static.embed_many([r["b"] for r in rows])
    stream = static.embed_many(texts[0::2][: args.stream])
    churn = static.embed_many(texts[0::2][args.stream : args.stream + args.churn])
    position = {q: i for i, q in enumerate(stored)}

    def exhaustive(query: np.ndarray) -> set[int]:
        scores = vectors @ query
        over = np.flatnonzero(scores >= floor)
        return set(over[np.argsort(-scores[over])[:k]].tolist())

    truth = [exhaustive(q) for q in asked]
    minilm = Embedder()
    close = [
        (i, position[r["a"]])
        for i, r in enumerate(rows)
        if r["a"] != r["b"]
        and position[r["a"]] in truth[i]
        and float(minilm.embed(r["a"]) @ minilm.embed(r["b"])) >= CLOSE
    ]
    print(
        f"{len(stored):,} stored ({vectors.shape[1]}-d float32), floor {floor:.2f}, {k} candidates; "
        f"{len(close)} close pairs (MiniLM >= {CLOSE}) among the exhaustive candidates; "
        f"{len(stream):,} stream questions timed, {len(churn):,} added and removed\n"
    )

    builders: list[Callable[[], Candidate]] = [
        lambda: cache_index(vectors),
        lambda: usearch_hnsw(vectors, "f32"),
        lambda: usearch_hnsw(vectors, "f16"),
        lambda: faiss_ivf(vectors),
        lambda: faiss_hnsw(vectors),
    ]
    indexes, built = [], []
    for build in builders:
        started = time.perf_counter()
        indexes.append(build())
        built.append(time.perf_counter() - started)

    spent: list[list[float]] = [[] for _ in indexes]
    for _ in range(ROUNDS):
        for n, index in enumerate(indexes):
            started = time.process_time()
            for query in stream:
                index.search(query, k, floor)
            spent[n].append((time.process_time() - started) / len(stream))
    base = float(np.median(spent[0]))

    print(
        "| index | close pairs found | candidates found | search | vs the cache's | build | add | remove | "
        "bytes / vector |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for index, times, build in zip(indexes, spent, built):
        found = [index.search(q, k, floor) for q in asked]
        pairs = sum(a in found[i] for i, a in close) / len(close)
        candidates = sum(len(f & t) for f, t in zip(found, truth)) / sum(len(t) for t in truth)
        size = index.bytes_used() / len(vectors)
        add, remove = churned(index, len(vectors), churn)
        median = float(np.median(times))
        print(
            f"| {index.name} | {pairs:.2%} | {candidates:.2%} | {median * 1e6:.0f} us | {median / base:.2f} | "
            f"{build:.1f} s | {add * 1e6:.0f} us | {remove * 1e6:.0f} us | {size:.0f} |"
        )


def churned(index: Candidate, first_key: int, vectors: np.ndarray) -> tuple[float, float]:
    """CPU per add and per remove, one vector at a time (as the cache stores and evicts)."""
    started = time.process_time()
    for n, vector in enumerate(vectors):
        index.add(first_key + n, vector)
    added = time.process_time()
    for n in range(len(vectors)):
        index.remove(first_key + n)
    return (added - started) / len(vectors), (time.process_time() - added) / len(vectors)


if __name__ == "__main__":
    main()
