"""The verifier's inputs: the differences it refuses outright, and one row of numbers per
(query, stored question) pair for the rest, from their cosine and the detectors in
`differences`.

Vetoes are differences the adjudication rule names as changing the answer whatever else the
pair shares: another number or unit, a negation on one side, a name where the other side has
another word, swapped roles, other CJK characters; and (`contrasts`, issue 27) a question that
points at context its text lacks, a negation more on one side, two spans trading places ("from
A to B" / "from B to A"), one word swapped for another that is not the same word ("before" /
"after", "buy" / "sell"). The rest are features whose weights are learned: a qualifier on one
side only, the kind of question, an extra sub-question, a name added as context. (A count of
the words on one side only is no feature: with the cosine it said nothing more on the labelled
data, and a paraphrase that rewords much yet keeps a high cosine made its weight point the
wrong way.)
"""

from __future__ import annotations

import numpy as np

from policies.semantic_cache import contrasts as c
from policies.semantic_cache import differences as d
from policies.semantic_cache.differences import Parsed
from policies.semantic_cache.text import tokens

NAMES = ("bias", "cosine", "qualifier_added", "yes_no_vs_wh", "other_question_word", "extra_question", "entity_added")
# The most each can be (pair_features): the two counts are capped at 2, the rest are 0 or 1.
FEATURE_MAX = np.array([1.0, 1.0, 1.0, 1.0, 1.0, 2.0, 2.0])
# Refused before the model is asked: each changes the answer in (nearly) every labelled pair
# where the rest of the pair would pass, and CJK text has no labelled pairs to learn from.
# Cheapest first: `vetoed` stops at the first that refuses (the name checks match words
# pairwise, ~100x the cost of the others).
VETOES = {
    "number_difference": d.number_difference,
    # another count of negations (which covers `d.negation_difference`, a negation on one side)
    "negation_count": lambda a, b: a.negations != b.negations,
    "points_outside": lambda a, b: c.points_outside(a) or c.points_outside(b),
    "cjk_difference": lambda a, b: d.cjk_difference(a, b) > 0,
    "entity_substitution": d.entity_substitution,
    "role_swap": d.role_swap,
    "reversed_order": c.reversed_order,
    "swapped_words": c.word_swap,
}


def normalise(text: str) -> str:
    """Text up to case and punctuation: two questions equal here are the same question."""
    return " ".join(tokens(text))


def same_words(a: Parsed, b: Parsed) -> bool:
    return bool(a.tokens) and a.tokens == b.tokens


def vetoed(a: Parsed, b: Parsed) -> bool:
    return any(check(a, b) for check in VETOES.values())


def pair_features(a: Parsed, b: Parsed, cosine: float) -> np.ndarray:
    """One row of NAMES, in order."""
    only_a, only_b = d.added_words(a, b)
    yes_no, other = d.kind_difference(a, b)
    return np.array(
        [
            1.0,
            cosine,
            float((only_a == 0) != (only_b == 0)),  # words on one side with nothing in their place
            float(yes_no),
            float(other),
            min(d.question_difference(a, b), 2),
            min(d.entity_added(a, b), 2),
        ],
        dtype=np.float64,
    )
