"""How the cascade's answer comparison (policies/agreement.py) reads the recorded GSM8K dev
answers, against their correctness labels: agreement by who was right. An answer pair that both
tiers got right but reads as disagreeing would count, in a bound without labels, as quality lost.

    python bench/answer_agreement.py [DATA.jsonl]
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.gsm8k_problems import DEFAULT_DATA  # noqa: E402
from policies.agreement import answers_agree  # noqa: E402


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_DATA
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    counts = Counter(
        (r["weak_correct"], r["strong_correct"], answers_agree(r["weak_response"], r["strong_response"])) for r in rows
    )
    print(f"{len(rows)} problems in {path}")
    print(f"{'weak right':<12}{'strong right':<14}{'agree':>7}{'disagree':>10}")
    for weak in (True, False):
        for strong in (True, False):
            print(f"{weak!s:<12}{strong!s:<14}{counts[weak, strong, True]:>7}{counts[weak, strong, False]:>10}")
    disagree = sum(n for (_, _, agree), n in counts.items() if not agree)
    lost = counts[False, True, False] - counts[True, False, False]
    print(f"disagreements {disagree}; accuracy lost per disagreement (strong right - weak right) {lost / disagree:.2f}")


if __name__ == "__main__":
    main()
