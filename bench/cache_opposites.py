"""Does the semantic cache serve the opposite question? (issue 27 item 4)

    python bench/cache_opposites.py [qqp_dev.jsonl] [--pairs bench/data/opposite_pairs.txt]
                                    [--per-kind 300] [--labels ADJUDICATED.jsonl ...] [--out variants.jsonl]

Builds near-duplicates of dev questions that ask something else, then asks the shipped
verifier, at the default bound and with the MiniLM cosine the cache would see, whether it
would serve the original's answer to the variant (the original stored, the variant asked).
That is an upper bound on what the gateway serves: its static stage only ever drops
candidates before the verifier sees them. Kinds of variant:

- opposite: one word swapped for its partner in bench/data/opposite_pairs.txt (before/after,
  buy/sell, ...), and quantifier: the same with quantifiers (all/some, always/never, ...);
- route: "from A to B" asked as "from B to A" (and "convert A to B" as "convert B to A");
- negation: "not" after the first auxiliary verb;
- deictic: the question pointing at context its text does not carry ("... given below", "this");
- number: a number in the question changed;
- reworded (with `--labels`): a word swapped for its partner in the *query* of a hand-judged
  pair whose stored question answers it ("same"): an opposite asked in other words.

Word pairs and questions are each cut in two by a hash: `tune` (what the check was developed
on) and `held-out` (never looked at while tuning). A variant is held out when its question is,
and for the word kinds, its pair too. Prints the share served per kind and split.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cache_labels import DEFAULT_PAIRS, read_labelled  # noqa: E402
from gateway.config.settings import SemanticCacheConfig  # noqa: E402
from policies.semantic_cache.differences import Parsed  # noqa: E402
from policies.semantic_cache.embedder import Embedder  # noqa: E402
from policies.semantic_cache.verifier import Verifier  # noqa: E402

PAIRS = ROOT / "bench" / "data" / "opposite_pairs.txt"
ROUTE = re.compile(
    r"\b(from|convert|translate|switch|migrate|transfer|move)\s+(\S+(?:\s+\S+)?)\s+(to|into)\s+(\S+(?:\s+\S+)?)", re.I
)
AUXILIARY = re.compile(r"\b(is|are|was|were|can|could|should|would|will|does|do|did)\b", re.I)
NUMBER = re.compile(r"\b\d+\b")
STOP = {"the", "a", "an", "my", "your", "to", "in", "on", "of", "and", "or", "for", "with", "at"}
# Ways a question points at what its text does not carry (issue 27: "the question given below").
DEICTIC = (
    lambda q: q.rstrip("?. ") + " given below?",
    lambda q: q.rstrip("?. ") + ", as in the attached picture?",
    lambda q: "Regarding the following, " + q[0].lower() + q[1:],
    lambda q: q.rstrip("?. ") + " in this case?",
    lambda q: q.rstrip("?. ") + " as mentioned above?",
)


@dataclass(frozen=True)
class Variant:
    stored: str
    query: str
    kind: str
    change: str  # what was changed ("before -> after")
    split: str  # "tune" or "held-out"


def half(text: str) -> str:
    return "tune" if hashlib.sha256(text.lower().encode()).digest()[0] % 2 == 0 else "held-out"


def read_pairs(path: Path) -> dict[str, list[tuple[str, str]]]:
    """Word pairs by kind, each in both directions."""
    by_kind: dict[str, list[tuple[str, str]]] = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            kind, a, b = line.split()
            by_kind.setdefault(kind, []).extend([(a, b), (b, a)])
    return by_kind


def swap_word(question: str, pairs: list[tuple[str, str]]) -> Iterator[tuple[str, str]]:
    """(variant, change) for each pair whose first word the question has, case kept."""
    order = sorted(pairs, key=lambda p: hashlib.sha256(f"{question}|{p}".encode()).digest())
    for a, b in order:  # another pair first for each question, so that common words do not crowd out the rest
        match = re.search(rf"\b{re.escape(a)}\b", question, re.I)
        if match:
            word = match.group(0)
            new = b.capitalize() if word[0].isupper() else b
            yield question[: match.start()] + new + question[match.end() :], f"{a} -> {b}"


def reverse_route(question: str) -> str | None:
    m = ROUTE.search(question)
    if not m or m.group(2).lower() in STOP or m.group(4).lower() in STOP:
        return None
    x, y = m.group(2), m.group(4).rstrip("?.,")
    if x.lower() == y.lower():
        return None
    head = question[: m.start(2)]
    tail = question[m.start(4) + len(y) :]
    return f"{head}{y} {m.group(3)} {x}{tail}"


def negate(question: str) -> str | None:
    m = AUXILIARY.search(question)
    return None if not m else question[: m.end()] + " not" + question[m.end() :]


def change_number(question: str) -> str | None:
    m = NUMBER.search(question)
    return None if not m else question[: m.start()] + str(int(m.group(0)) * 2 + 1) + question[m.end() :]


def variants(questions: list[str], pairs: dict[str, list[tuple[str, str]]], per_kind: int) -> list[Variant]:
    out: list[Variant] = []
    for kind, kind_pairs in pairs.items():
        made = 0
        for q in questions:
            for query, change in swap_word(q, kind_pairs):
                a, b = change.split(" -> ")
                pair_split = half(" ".join(sorted((a.lower(), b.lower()))))
                split = "held-out" if half(q) == pair_split == "held-out" else "tune" if half(q) == pair_split else ""
                if split:
                    out.append(Variant(q, query, kind, change, split))
                    made += 1
                break  # one variant a question
            if made >= per_kind:
                break
    for kind, make in (("route", reverse_route), ("negation", negate), ("number", change_number)):
        found = [(q, v) for q in questions if (v := make(q))][:per_kind]
        out += [Variant(q, v, kind, "", half(q)) for q, v in found]
    for i, q in enumerate(questions[:per_kind]):
        out.append(Variant(q, DEICTIC[i % len(DEICTIC)](q), "deictic", "", half(q)))
    return out


def reworded(labels: list[Path], pairs: dict[str, list[tuple[str, str]]]) -> list[Variant]:
    """The opposite of a rewording: the query of each pair judged the same, one word swapped."""
    out = []
    for pair in read_labelled(labels):
        if pair.same:
            for query, change in swap_word(pair.query, [p for kind in pairs.values() for p in kind]):
                words = " ".join(sorted(w.lower() for w in change.split(" -> ")))
                both = {half(pair.query), half(words)}
                out += [Variant(pair.stored, query, "reworded", change, both.pop())] if len(both) == 1 else []
                break
    return out


def served(found: list[Variant], verifier: Verifier, rate: float) -> list[bool]:
    embedder = Embedder()
    texts = sorted({t for v in found for t in (v.stored, v.query)})
    vectors = dict(zip(texts, embedder.embed_many(texts)))
    return [
        verifier.accepts(Parsed.of(v.query), Parsed.of(v.stored), float(vectors[v.query] @ vectors[v.stored]), rate)
        for v in found
    ]


def report(found: list[Variant], hits: list[bool]) -> None:
    print("| kind | split | variants | served | share |\n|---|---|---|---|---|")
    for kind in sorted({v.kind for v in found}):
        for split in ("tune", "held-out"):
            rows = [h for v, h in zip(found, hits) if v.kind == kind and v.split == split]
            if rows:
                print(f"| {kind} | {split} | {len(rows)} | {sum(rows)} | {sum(rows) / len(rows):.1%} |")
    opposite = [h for v, h in zip(found, hits) if v.kind not in ("number",)]
    print(f"all but number: {sum(opposite)}/{len(opposite)} served ({sum(opposite) / max(len(opposite), 1):.1%})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="?", default=str(DEFAULT_PAIRS), help="qqp_dev.jsonl")
    parser.add_argument("--pairs", default=str(PAIRS))
    parser.add_argument("--per-kind", type=int, default=300)
    parser.add_argument("--labels", nargs="*", default=[], help="hand-judged pairs for the reworded kind")
    parser.add_argument("--out", help="write the variants (and whether each was served) here")
    parser.add_argument("--show", type=int, default=10, help="print this many served variants")
    args = parser.parse_args()
    rows = [json.loads(line) for line in open(args.data)]
    questions = list(dict.fromkeys(q for r in rows for q in (r["a"], r["b"]) if 4 <= len(q.split()) <= 20))
    pairs = read_pairs(Path(args.pairs))
    found = variants(questions, pairs, args.per_kind) + reworded([Path(p) for p in args.labels], pairs)
    rate = SemanticCacheConfig().max_false_hit_rate
    hits = served(found, Verifier.load(), rate)
    print(f"{len(found)} variants of {len(questions)} dev questions; verifier at max_false_hit_rate {rate}")
    report(found, hits)
    for v in [v for v, h in zip(found, hits) if h][: args.show]:
        print(f"  served ({v.kind}, {v.split}): {v.stored!r} -> {v.query!r}")
    if args.out:
        with open(args.out, "w") as f:
            for v, h in zip(found, hits):
                f.write(json.dumps({**asdict(v), "served": h}) + "\n")


if __name__ == "__main__":
    main()
