"""Candidate cache hits to judge by hand, by the data README's adjudication protocol.

    python bench/qqp_candidates.py [PATH_TO_qqp_dev.jsonl] [--blocks 1,2,3] [--out FILE]

The pairs are cut into blocks of 2,000 (block 0 is the first 2,000, the part the shipped
qqp_dev_adjudicated.jsonl covers). In each block every `a` is stored; each `b` gets its two
nearest stored questions with cosine >= 0.85 under the shipped embedder as candidates. One JSON
object a line: `{"query": b, "stored": a, "block": k, "cosine": c}`; Quora's `duplicate` label
is left out on purpose, so the candidates can be judged blind to it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from policies.semantic_cache.embedder import Embedder  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "qqp_dev.jsonl"
BLOCK = 2000
NEAREST = 2
MIN_COSINE = 0.85


def block_candidates(embedder: Embedder, pairs: list[dict], block: int) -> list[dict]:
    stored = embedder.embed_many([p["a"] for p in pairs])  # unit rows: a dot product is a cosine
    queries = embedder.embed_many([p["b"] for p in pairs])
    out = []
    for pair, cosines in zip(pairs, queries @ stored.T, strict=True):
        for row in np.argsort(-cosines)[:NEAREST]:
            if cosines[row] >= MIN_COSINE:
                out.append(
                    {
                        "query": pair["b"],
                        "stored": pairs[row]["a"],
                        "block": block,
                        "cosine": round(float(cosines[row]), 4),
                    }
                )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="?", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--blocks", default="1,2,3", help="comma-separated block numbers")
    parser.add_argument("--out", type=Path, help="write here instead of stdout")
    args = parser.parse_args()
    pairs = [json.loads(line) for line in args.data.read_text().splitlines() if line.strip()]
    embedder = Embedder()
    lines = []
    for block in (int(b) for b in args.blocks.split(",")):
        found = block_candidates(embedder, pairs[block * BLOCK : (block + 1) * BLOCK], block)
        print(f"block {block}: {len(found)} candidates", file=sys.stderr)
        lines += [json.dumps(c, ensure_ascii=False) for c in found]
    text = "\n".join(lines) + "\n"
    if args.out:
        args.out.write_text(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
