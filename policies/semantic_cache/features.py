"""Pair features for the verifier: why two questions with close embeddings may still ask
different things. Pure functions of the two texts and their cosine.

Embeddings blur exactly the details that change an answer — a number ("lose 5 kg" / "lose
50 kg"), a negation, a name, the question word ("how" / "why") — so each gets a feature that
says whether the two texts disagree on it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
NUMBER = re.compile(r"\d+(?:[.,]\d+)?")
CAPITALISED = re.compile(r"(?<![.?!]\s)(?<!^)\b[A-Z][a-zA-Z0-9]+")
NUMBER_WORDS = {"zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6",
                "seven": "7", "eight": "8", "nine": "9", "ten": "10", "eleven": "11", "twelve": "12",
                "twenty": "20", "thirty": "30", "fifty": "50", "hundred": "100", "thousand": "1000",
                "million": "1000000", "billion": "1000000000"}
NEGATIONS = {"not", "no", "never", "none", "nor", "without", "cannot", "nobody", "nothing", "neither",
             "isn't", "aren't", "wasn't", "weren't", "don't", "doesn't", "didn't", "can't", "won't",
             "wouldn't", "shouldn't", "couldn't", "haven't", "hasn't", "hadn't", "mustn't"}
QUESTION_WORDS = ("how", "why", "what", "when", "where", "who", "which", "whom", "whose")
STOPWORDS = {"a", "an", "the", "is", "are", "was", "were", "be", "been", "do", "does", "did", "i", "you", "my",
             "your", "me", "to", "of", "in", "on", "for", "and", "or", "it", "its", "this", "that", "there",
             "with", "as", "at", "by", "from", "can", "could", "should", "would", "will", "some", "any", "if",
             "so", "we", "they", "he", "she", "his", "her", "their", "our", "get", "best", "way", "ways",
             "good", "much", "many", "most", "more", "about", "one", "someone", "people", "have", "has", "had",
             "am", "into", "than", "then", "what", "how", "why", "when", "where", "who", "which", "whom",
             "whose", "s", "t", "us", "them", "also", "really", "ever", "all", "other"}

NAMES = ("bias", "cosine", "cos_sq", "word_jaccard", "content_jaccard", "content_containment",
         "trigram_jaccard", "unshared_content", "number_mismatch", "number_only_one", "negation_mismatch",
         "entity_mismatch", "question_word_mismatch", "length_ratio", "cos_x_content", "order_agreement",
         "veto")


def words(text: str) -> list[str]:
    return WORD.findall(text.lower().replace("’", "'"))


def normalise(text: str) -> str:
    """Text up to case and punctuation: two questions equal here are the same question."""
    return " ".join(words(text))


def numbers(tokens: list[str], text: str) -> set[str]:
    found = {n.replace(",", "") for n in NUMBER.findall(text)}
    return found | {NUMBER_WORDS[t] for t in tokens if t in NUMBER_WORDS}


def _jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if a | b else 1.0


def _trigrams(text: str) -> set[str]:
    s = f"  {normalise(text)} "
    return {s[i:i + 3] for i in range(len(s) - 2)}


def _question_word(tokens: list[str]) -> str | None:
    return next((t for t in tokens if t in QUESTION_WORDS), None)


@dataclass(frozen=True, slots=True)
class Parsed:
    """What the features need of one text; parse a stored question once, compare it often."""

    tokens: tuple[str, ...]
    content: frozenset[str]
    numbers: frozenset[str]
    negations: int
    entities: frozenset[str]
    question_word: str | None
    trigrams: frozenset[str]

    @classmethod
    def of(cls, text: str) -> Parsed:
        tokens = words(text)
        return cls(tuple(tokens), frozenset(t for t in tokens if t not in STOPWORDS),
                   frozenset(numbers(tokens, text)), sum(t in NEGATIONS for t in tokens),
                   frozenset(e.lower() for e in CAPITALISED.findall(text)), _question_word(tokens),
                   frozenset(_trigrams(text)))


def _lcs(a: list[str], b: list[str]) -> int:
    row = [0] * (len(b) + 1)
    for x in a:
        prev = 0
        for j, y in enumerate(b):
            prev, row[j + 1] = row[j + 1], prev + 1 if x == y else max(row[j + 1], row[j])
    return row[-1]


def order_agreement(a: Parsed, b: Parsed) -> float:
    """Whether the shared content words come in the same order ("Chinese think of Americans"
    is not "Americans think of the Chinese"): their longest common subsequence over their count."""
    shared = a.content & b.content
    seq_a = [t for t in a.tokens if t in shared]
    seq_b = [t for t in b.tokens if t in shared]
    if len(shared) < 2:
        return 1.0
    return _lcs(list(dict.fromkeys(seq_a)), list(dict.fromkeys(seq_b))) / len(shared)


def vetoed(a: Parsed, b: Parsed) -> bool:
    """Differences that change the answer whatever the embedding says: different numbers, a
    negation on one side only, a name on one side only."""
    numbers_differ = a.numbers != b.numbers
    negation_differs = (a.negations > 0) != (b.negations > 0)
    names_differ = bool((a.entities ^ b.entities) - (a.content & b.content))
    return numbers_differ or negation_differs or names_differ


def pair_features(a: Parsed, b: Parsed, cosine: float) -> np.ndarray:
    """One row of NAMES, in order."""
    content_union = a.content | b.content
    shared = len(a.content & b.content)
    smaller = min(len(a.content), len(b.content)) or 1
    content_j = _jaccard(a.content, b.content)
    ents = (a.entities ^ b.entities) - (a.content & b.content)  # a name both use, cased differently, agrees
    return np.array([
        1.0,
        cosine,
        cosine * cosine,
        _jaccard(set(a.tokens), set(b.tokens)),
        content_j,
        shared / smaller,
        _jaccard(a.trigrams, b.trigrams),
        min(len(content_union) - shared, 8) / 8,
        float(a.numbers != b.numbers and bool(a.numbers) and bool(b.numbers)),
        float(bool(a.numbers) != bool(b.numbers)),
        float((a.negations > 0) != (b.negations > 0)),
        min(len(ents), 3) / 3,
        float(a.question_word != b.question_word),
        min(len(a.tokens), len(b.tokens)) / max(len(a.tokens), len(b.tokens), 1),
        cosine * content_j,
        order_agreement(a, b),
        float(vetoed(a, b)),
    ], dtype=np.float64)
