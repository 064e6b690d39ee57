"""The semantic cache's static index: how many lists, how many probed, at 100k stored questions.

    python bench/semantic_cache_index.py [qqp_dev.jsonl] [--fill 100000] [--layouts 1x16,2x16,4x16,4x20]

The store holds every `a` of the QQP dev pairs and fillers up to `--fill` (the speed
benchmark's splices); each `b` is asked, and a stream of new questions. For each layout
(`lists_per_root` x `nprobe`: the index keeps lists_per_root x sqrt(n) lists and scans the
`nprobe` nearest) it counts, against an exhaustive search of the same static vectors with the
same floor and number of candidates:
- close pairs found: of the pairs at MiniLM cosine >= 0.93 (where the verifier can serve)
  whose `a` the exhaustive search puts among the `b`'s candidates, the share the index puts
  there too (a miss here is a hit lost);
- candidates found: the share of all exhaustive candidates over the floor the index returns;
- the time a search takes on the stream, timed in alternating rounds, as a ratio to the
  first layout's in the same run, and the index's build time.

With `--doubling` it instead fills an index from empty, one question at a time as the cache
does on a miss (a search, then an add), training each doubling's lists in the call that
reaches it and on the worker thread (the default), and prints the slowest calls: what a request
that arrives at a doubling waits.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.semantic_cache_stage import fillers, questions  # noqa: E402
from policies.semantic_cache.embedder import Embedder  # noqa: E402
from policies.semantic_cache.index import VectorIndex  # noqa: E402
from policies.semantic_cache.static_embedder import StaticEmbedder  # noqa: E402
from policies.semantic_cache.verifier import Verifier  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
CLOSE = 0.93  # MiniLM cosine from which the verifier serves some pairs (docs/caching.md)
ROUNDS = 3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="?", type=Path, default=DATA / "qqp_dev.jsonl")
    parser.add_argument("--fill", type=int, default=100_000)
    parser.add_argument(
        "--layouts", default="1x16,2x16,4x16,4x20", help="lists_per_root x nprobe, the first the baseline"
    )
    parser.add_argument("--stream", type=int, default=2000, help="new questions timed")
    parser.add_argument("--doubling", action="store_true", help="time the fill's calls through the doublings")
    args = parser.parse_args()
    layouts = [(float(a), int(b)) for a, b in (x.split("x") for x in args.layouts.split(","))]

    rows = [json.loads(line) for line in args.data.read_text().splitlines()]
    texts = questions(args.data)
    stored = list(dict.fromkeys(r["a"] for r in rows))
    stored += fillers(texts[1::2], args.fill - len(stored), seed=1)
    static, verifier = StaticEmbedder.load(), Verifier.load()
    floor, k = static.gate_for(verifier.least_cosine_needed(0.05) or 1.0), static.candidates
    vectors = static.embed_many(stored)
    if args.doubling:
        doubling(vectors, k, floor)
        return
    asked = static.embed_many([r["b"] for r in rows])
    stream = static.embed_many(texts[0::2][: args.stream])
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
        f"{len(stored):,} stored, floor {floor:.2f}, {k} candidates; {len(close)} close pairs (MiniLM >= {CLOSE}) "
        f"among the exhaustive candidates; {len(stream):,} stream questions timed\n"
    )

    indexes, built = [], []
    for per_root, nprobe in layouts:
        started = time.perf_counter()
        index = VectorIndex(static.dim, nprobe=nprobe, lists_per_root=per_root)
        index.add_many([str(i) for i in range(len(stored))], vectors)
        built.append(time.perf_counter() - started)
        indexes.append(index)
    spent: list[list[float]] = [[] for _ in layouts]
    for _ in range(ROUNDS):
        for n, index in enumerate(indexes):
            started = time.process_time()
            for query in stream:
                index.search(query, k, floor)
            spent[n].append((time.process_time() - started) / len(stream))
    base = float(np.median(spent[0]))

    print("| lists x sqrt(n) | lists | nprobe | close pairs found | candidates found | search | vs first | build |")
    print("|---|---|---|---|---|---|---|---|")
    for (per_root, nprobe), index, times, build in zip(layouts, indexes, spent, built):
        found = [{int(key) for key, _ in index.search(q, k, floor)} for q in asked]
        pairs = sum(a in found[i] for i, a in close) / len(close)
        candidates = sum(len(f & t) for f, t in zip(found, truth)) / sum(len(t) for t in truth)
        median = float(np.median(times))
        print(
            f"| {per_root:g} | {index.lists} | {nprobe} | {pairs:.2%} | {candidates:.2%} | "
            f"{median * 1e6:.0f} us | {median / base:.2f} | {build:.1f} s |"
        )


def doubling(vectors: np.ndarray, k: int, floor: float) -> None:
    """Each vector searched then added, from empty; every call's wall time, for the trainings in
    the call (background=False, as before) and on the worker thread."""
    print(f"filling an index with {len(vectors):,} questions, a search and an add each\n")
    print("| training | slowest call | 2nd | 3rd | calls over 50 ms | p99.9 | fill |")
    print("|---|---|---|---|---|---|---|")
    for background in (False, True):
        index = VectorIndex(vectors.shape[1], background=background)
        spent = np.zeros(len(vectors))
        started = time.perf_counter()
        for i, vector in enumerate(vectors):
            t = time.perf_counter()
            index.search(vector, k, floor)
            index.add(str(i), vector)
            spent[i] = time.perf_counter() - t
        index.settle()
        fill = time.perf_counter() - started
        top = np.sort(spent)[::-1][:3] * 1000
        p999 = np.quantile(spent, 0.999) * 1000
        print(
            f"| {'worker thread' if background else 'in the call'} | {top[0]:.1f} ms | {top[1]:.1f} ms | "
            f"{top[2]:.1f} ms | {int((spent > 0.05).sum())} | {p999:.2f} ms | {fill:.1f} s |"
        )


if __name__ == "__main__":
    main()
