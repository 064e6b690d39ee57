"""The recorded GSM8K dev problems the cascade benchmarks replay: each query (with its MiniLM
vector, which the learned scorer reads for the topic), the weak and strong tiers' recorded answers,
whether they agree, whether each is right, and what each call costs at the recorded models' list
prices (Mixtral $0.60/M in and out, GPT-4-1106 $10/M in, $30/M out), in tiktoken counts, as the
fake upstream (tests/fakes/fake_recorded.py) bills them."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from gateway.core.tokens import count_prompt, count_text  # noqa: E402
from policies.agreement import answers_agree  # noqa: E402
from policies.scorers import Scored  # noqa: E402
from policies.scorers.training import TrainingExample  # noqa: E402
from policies.semantic_cache.embedder import Embedder  # noqa: E402

# ../shared next to the checkout (a worktree under wt/ looks one level further up)
DEFAULT_DATA = next(
    (
        d / "shared" / "data" / "gsm8k_dev.jsonl"
        for d in (ROOT.parent, ROOT.parent.parent)
        if (d / "shared" / "data").is_dir()
    ),
    ROOT.parent / "shared" / "data" / "gsm8k_dev.jsonl",
)
PRICES = {"weak": (Decimal("0.6"), Decimal("0.6")), "strong": (Decimal(10), Decimal(30))}


@dataclass(frozen=True)
class Problem:
    item: Scored
    agrees: bool
    weak_right: bool
    strong_right: bool
    weak_cost: Decimal
    strong_cost: Decimal


def cost(prompt_tokens: int, completion_tokens: int, tier: str) -> Decimal:
    price_in, price_out = PRICES[tier]
    return (prompt_tokens * price_in + completion_tokens * price_out) / 10**6


def load(path: Path) -> list[Problem]:
    """The recorded problems, each query with its MiniLM vector (the scorer reads its topic)."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    embedder = Embedder()
    started = time.perf_counter()
    vectors = embedder.embed_many([r["prompt"] for r in rows])
    took = time.perf_counter() - started
    print(f"the queries' MiniLM vectors: {len(rows)} in {took:.1f} s, {took / len(rows) * 1000:.1f} ms each (1 thread)")
    problems = []
    for r, vector in zip(rows, vectors):
        prompt = count_prompt({"model": "x", "messages": [{"role": "user", "content": r["prompt"]}]})
        problems.append(
            Problem(
                Scored(r["prompt"], r["weak_response"], query_vector=vector),
                answers_agree(r["weak_response"], r["strong_response"]),
                bool(r["weak_correct"]),
                bool(r["strong_correct"]),
                cost(prompt, count_text(r["weak_response"]), "weak"),
                cost(prompt, count_text(r["strong_response"]), "strong"),
            )
        )
    return problems


def training_examples(problems: Sequence[Problem]) -> list[TrainingExample]:
    return [TrainingExample(p.item, p.weak_right, p.strong_right, p.agrees) for p in problems]
