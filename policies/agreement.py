"""Do two answers agree? The cascade's quality target is agreement with its last tier.

Two answers agree when they reach the same final number (for answers that end in one, like
math or counting questions), or, for other answers, when their normalized words overlap with
an F1 of at least `min_f1`. Pure functions, tested with tables.
"""

from __future__ import annotations

import re
from collections import Counter

from policies.scorers.answer_features import final_number

WORD = re.compile(r"[a-z0-9]+")


def _words(text: str) -> list[str]:
    return WORD.findall(text.lower())


def token_f1(a: str, b: str) -> float:
    wa, wb = Counter(_words(a)), Counter(_words(b))
    if not wa and not wb:
        return 1.0
    common = sum((wa & wb).values())
    if common == 0:
        return 0.0
    precision, recall = common / sum(wa.values()), common / sum(wb.values())
    return 2 * precision * recall / (precision + recall)


def answers_agree(a: str, b: str, min_f1: float = 0.6) -> bool:
    fa, fb = final_number(a), final_number(b)
    if fa is not None and fb is not None:
        return abs(fa - fb) <= 1e-6 * max(1.0, abs(fb))
    return token_f1(a, b) >= min_f1
