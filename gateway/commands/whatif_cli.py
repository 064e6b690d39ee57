"""`costgate whatif FILE`: what a cascade would do on recorded traffic, before turning it on.

FILE is JSONL, one request a line, with the query, the cheap tier's answer and the last tier's
(field names are options, so a dataset reads as it comes: `--cheap-field weak_response
--last-field strong_response`), and, when known, whether each was right. Each call's cost is its
tokens (tiktoken) at the tiers' prices (`--cheap-price` and `--last-price`, dollars per million
tokens in and out). The requests are replayed through a new cascade configured with only
`--quality-target` (policies/whatif.py: the same controller, early fits, refits and router as
the gateway), over `--draws` resamples, and the report gives the mean and an interval at
`--level` for the cost against the last tier alone, the dollars saved, and the quality kept:
agreement with the last tier, and accuracy against the labels when the rows carry them. No
provider is called: every answer is in the file.
"""

from __future__ import annotations

import argparse
import json
from decimal import Decimal
from pathlib import Path

from gateway.core.tokens import count_prompt, count_text
from policies.agreement import answers_agree
from policies.pricing import Price, Usage, cost_of
from policies.quality_controller import Policy
from policies.scorers import Scored
from policies.whatif import Recorded, estimate, report

PREFIX = "costgate whatif: "


def price(text: str) -> Price:
    """`IN,OUT` dollars per million tokens."""
    try:
        inp, out = (Decimal(x) for x in text.split(","))
    except (ValueError, ArithmeticError):  # Decimal refuses a non-number with InvalidOperation
        raise argparse.ArgumentTypeError(f"{text!r}: expected IN,OUT dollars per million tokens") from None
    return Price.per_million(inp, out)


def read_rows(path: Path, args: argparse.Namespace) -> list[Recorded]:
    rows = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            query, cheap, last = str(obj[args.query_field]), str(obj[args.cheap_field]), str(obj[args.last_field])
        except json.JSONDecodeError as err:
            raise SystemExit(f"{PREFIX}{path}:{n}: not JSON ({err.msg})") from None
        except (KeyError, TypeError) as err:
            raise SystemExit(f"{PREFIX}{path}:{n}: missing field {err}") from None
        prompt = count_prompt({"model": "x", "messages": [{"role": "user", "content": query}]})
        cheap_right = bool(obj[args.cheap_right_field]) if args.cheap_right_field in obj else None
        last_right = bool(obj[args.last_right_field]) if args.last_right_field in obj else None
        rows.append(
            Recorded(
                Scored(query, cheap),
                answers_agree(cheap, last),
                cost_of(Usage(prompt, count_text(cheap)), args.cheap_price),
                cost_of(Usage(prompt, count_text(last)), args.last_price),
                cheap_right,
                last_right,
            )
        )
    return rows


def with_vectors(rows: list[Recorded]) -> list[Recorded]:
    """The queries' MiniLM vectors, which the scorer and the router read for the topic."""
    from dataclasses import replace

    from policies.semantic_cache.embedder import Embedder  # onnxruntime: only here

    if not rows:
        return []
    vectors = Embedder().embed_many([r.item.query for r in rows])
    return [replace(r, item=replace(r.item, query_vector=v)) for r, v in zip(rows, vectors)]


def run(args: argparse.Namespace) -> int:
    path = Path(args.file)
    if not path.is_file():
        raise SystemExit(f"{PREFIX}{path}: no such file")
    rows = read_rows(path, args)
    if not rows:
        raise SystemExit(f"{PREFIX}{path}: no requests")
    if not args.no_vectors:
        rows = with_vectors(rows)
    policy = Policy(args.quality_target, args.confidence, last_tier_quality=args.last_tier_quality)
    found = estimate(rows, policy, args.draws, args.level, router=not args.no_router, seed=args.seed)
    print(json.dumps(report(found), indent=1))
    return 0


def add_commands(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("whatif", help="estimate a cascade's savings and quality on recorded traffic")
    p.add_argument("file", help="JSONL: the query, the cheap and the last tier's answers, a line each")
    p.add_argument("--query-field", default="prompt")
    p.add_argument("--cheap-field", default="cheap_answer")
    p.add_argument("--last-field", default="last_answer")
    p.add_argument("--cheap-right-field", default="cheap_correct")
    p.add_argument("--last-right-field", default="last_correct")
    p.add_argument("--cheap-price", type=price, default=price("0.6,0.6"), help="IN,OUT dollars per million tokens")
    p.add_argument("--last-price", type=price, default=price("10,30"), help="IN,OUT dollars per million tokens")
    p.add_argument("--quality-target", type=float, default=0.95)
    p.add_argument("--confidence", type=float, default=0.7)
    p.add_argument("--last-tier-quality", type=float, default=None)
    p.add_argument("--no-router", action="store_true", help="the cascade without the router before the call")
    p.add_argument("--no-vectors", action="store_true", help="skip the queries' MiniLM vectors (topic as the mean)")
    p.add_argument("--draws", type=int, default=20)
    p.add_argument("--level", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(run=run)
