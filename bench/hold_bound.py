"""Issue 24, item 3: how far a hold over-reserves on ordinary chat once a model whose tokenizer
costgate does not run (Anthropic's through litellm, a custom model) is bounded by the prompt's
UTF-8 bytes instead of a tiktoken count.

Ordinary requests: every GSM8K question (659) and 1,000 Quora questions from the shared dev data,
each a chat with a one-line system prompt. For each, the prompt bound both ways
(gateway/tokens.billed_prompt_tokens: tiktoken for "gpt-4o", bytes for
"anthropic/claude-haiku-4-5"), then the whole hold (prompt x input price + (max_tokens + the
meter's slack) x output price) at claude-haiku-4-5's list price ($1 / $5 per million), for
max_tokens 256 and 1024. The baseline is the tiktoken hold of the same request in the same run.
Counting only: no requests are sent, no timing (figures do not depend on the machine's load).

    .venv/bin/python bench/hold_bound.py [--data /work/shared/data]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from decimal import Decimal
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository's packages before bench/'s files

from gateway.core.tokens import billed_prompt_tokens
from gateway.upstream.worst_case import count_slack

SYSTEM = "You are a helpful assistant. Answer briefly."
IN, OUT = Decimal(1), Decimal(5)  # claude-haiku-4-5, $ per million tokens


def questions(data: Path) -> list[str]:
    gsm = [json.loads(line)["prompt"] for line in (data / "gsm8k_dev.jsonl").open()]
    qqp = [json.loads(line)["a"] for line in (data / "qqp_dev.jsonl").open()][:1000]
    return gsm + qqp


def hold(prompt: int, cap: int) -> Decimal:
    return prompt * IN + (cap + count_slack(cap)) * OUT


def pct(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(q * len(values)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("/work/shared/data"))
    args = parser.parse_args()
    prompt_ratio: list[float] = []
    hold_ratio: dict[int, list[float]] = {256: [], 1024: []}
    for text in questions(args.data):
        body = {"messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": text}], "stream": True}
        exact = billed_prompt_tokens(body, "gpt-4o")
        by_bytes = billed_prompt_tokens(body, "anthropic/claude-haiku-4-5")
        prompt_ratio.append(by_bytes / exact)
        for cap, ratios in hold_ratio.items():
            ratios.append(float(hold(by_bytes, cap) / hold(exact, cap)))
    print(f"{len(prompt_ratio)} ordinary chat requests (GSM8K + Quora questions), bytes bound / tiktoken bound:")
    print(f"  prompt tokens held: median {statistics.median(prompt_ratio):.2f}x, p95 {pct(prompt_ratio, 0.95):.2f}x")
    for cap, ratios in hold_ratio.items():
        print(
            f"  whole hold, max_tokens {cap}: median {statistics.median(ratios):.3f}x, "
            f"p95 {pct(ratios, 0.95):.3f}x, max {max(ratios):.3f}x"
        )


if __name__ == "__main__":
    main()
