"""What can make a stored question's answer wrong for a query although their embeddings are
close. Each detector is a pure function of the two parsed questions; the verifier's features
and vetoes are built from them.

Embeddings blur exactly the details that change an answer: a number or unit ("lose 5 kg" /
"lose 50 kg"), a name ("best pizza in Boston" / "in Austin"), who does what to whom ("why did
Spain beat Italy" / "why did Italy beat Spain"), a qualifier or a sub-question on one side only
("cheap hotels in Rome" / "cheap pet-friendly hotels in Rome", "... and why?"), a negation, and
the kind of question ("are cats narcissists?" / "why are cats narcissists?").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from policies.semantic_cache.text import (
    FUZZY_LIMIT,
    compounds,
    content_words,
    is_cjk,
    joined_pieces,
    same_word,
    tokens,
    unmatched,
)

NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
NUMBER_WORDS = {
    "zero": "0",
    "two": "2",
    "three": "3",
    "four": "4",
    "five": "5",
    "six": "6",
    "seven": "7",
    "eight": "8",
    "nine": "9",
    "ten": "10",
    "eleven": "11",
    "twelve": "12",
    "fifteen": "15",
    "twenty": "20",
    "thirty": "30",
    "forty": "40",
    "fifty": "50",
    "hundred": "100",
    "thousand": "1000",
    "million": "1000000",
    "billion": "1000000000",
    "half": "0.5",
    "first": "1st",
    "third": "3rd",
    "fourth": "4th",
    "fifth": "5th",
    "tenth": "10th",
}
UNITS = {
    "kg": "kg",
    "kgs": "kg",
    "kilo": "kg",
    "kilos": "kg",
    "kilogram": "kg",
    "kilograms": "kg",
    "lb": "lb",
    "lbs": "lb",
    "pound": "lb",
    "pounds": "lb",
    "g": "g",
    "gram": "g",
    "grams": "g",
    "km": "km",
    "kms": "km",
    "kilometer": "km",
    "kilometers": "km",
    "kilometre": "km",
    "kilometres": "km",
    "mile": "mi",
    "miles": "mi",
    "m": "m",
    "meter": "m",
    "meters": "m",
    "metre": "m",
    "metres": "m",
    "cm": "cm",
    "inch": "in",
    "inches": "in",
    "ft": "ft",
    "foot": "ft",
    "feet": "ft",
    "day": "day",
    "days": "day",
    "week": "week",
    "weeks": "week",
    "month": "month",
    "months": "month",
    "year": "year",
    "years": "year",
    "hour": "h",
    "hours": "h",
    "minute": "min",
    "minutes": "min",
    "dollar": "usd",
    "dollars": "usd",
    "usd": "usd",
    "rupee": "inr",
    "rupees": "inr",
    "rs": "inr",
    "inr": "inr",
    "euro": "eur",
    "euros": "eur",
    "percent": "%",
    "gb": "gb",
    "mb": "mb",
    "tb": "tb",
    "ghz": "ghz",
    "mph": "mph",
    "calorie": "kcal",
    "calories": "kcal",
}
NEGATIONS = frozenset(
    {
        "not",
        "no",
        "never",
        "none",
        "nor",
        "without",
        "cannot",
        "nobody",
        "nothing",
        "neither",
        "isn't",
        "aren't",
        "wasn't",
        "weren't",
        "don't",
        "doesn't",
        "didn't",
        "can't",
        "won't",
        "wouldn't",
        "shouldn't",
        "couldn't",
        "haven't",
        "hasn't",
        "hadn't",
        "mustn't",
        "unable",
    }
)
AUXILIARIES = frozenset(
    {
        "is",
        "are",
        "was",
        "were",
        "am",
        "do",
        "does",
        "did",
        "can",
        "could",
        "will",
        "would",
        "should",
        "shall",
        "may",
        "might",
        "must",
        "has",
        "have",
        "had",
        "isn't",
        "aren't",
        "don't",
        "doesn't",
        "didn't",
        "can't",
        "won't",
        "wouldn't",
        "shouldn't",
    }
)
KINDS = {
    "how": "how",
    "why": "why",
    "what": "what",
    "what's": "what",
    "which": "what",
    "when": "when",
    "where": "where",
    "who": "who",
    "whom": "who",
    "whose": "who",
}
YES_NO = "yes/no"
# A second question joined to the first: "... and why?", "If so, how?", "What are some examples?"
FOLLOW_UP = re.compile(
    r"(?:\band|\bor|\bif (?:so|yes|not|no)|\?)[\s,]+(?:then\s+)?(?:how|why|what|which|when|where|who|"
    r"is|are|do|does|can|should|would)\b",
    re.IGNORECASE,
)
CAPITALISED = re.compile(r"(?<![.?!:]\s)(?<!^)(?<![\"'(])\b(?:[A-Z][\w'-]*|[a-z]+[A-Z][\w-]*)")


@dataclass(frozen=True, slots=True)
class Parsed:
    """What the detectors need of one text; parse a stored question once, compare it often."""

    tokens: tuple[str, ...]
    content: frozenset[str]
    compounds: frozenset[str]
    numbers: frozenset[str]
    units: frozenset[str]
    negations: int  # how many negations the text has ("... or not" is none)
    entities: frozenset[str]  # capitalised words past the start of a sentence, lower-cased
    kind: str | None  # YES_NO or the question word's KINDS value
    questions: int  # how many questions the text asks

    @classmethod
    def of(cls, text: str) -> Parsed:
        words = tokens(text)
        return cls(
            tuple(words),
            content_words(words),
            compounds(words),
            numbers(words),
            frozenset(UNITS[w] for w in words if w in UNITS),
            negations(words),
            entities(text),
            question_kind(words),
            question_count(text),
        )


def word_overlap(a: Parsed, b: Parsed) -> float:
    """The share of the two texts' words they have in common (Jaccard, 0 to 1): what the static
    stage reads besides its cosine (`StaticEmbedder.clears`)."""
    x, y = set(a.tokens), set(b.tokens)
    return len(x & y) / len(x | y) if x or y else 1.0


def negations(words: list[str]) -> int:
    """How many negations the words have; "... or not" asks both ways and is none."""
    return sum(w in NEGATIONS and not (w == "not" and i > 0 and words[i - 1] == "or") for i, w in enumerate(words))


def numbers(words: list[str]) -> frozenset[str]:
    """Numbers as written in digits or words ("five" is "5"; "1,000" is "1000")."""
    found = {w.replace(",", "") for w in words if NUMBER.fullmatch(w)}
    return frozenset(found | {NUMBER_WORDS[w] for w in words if w in NUMBER_WORDS})


def entities(text: str) -> frozenset[str]:
    """The content words of capitalised words and single capital letters past the start of a
    sentence ("Boston", "iPhone", "Measure L"), except "I"."""
    found = (tokens(w) for w in CAPITALISED.findall(text) if w != "I" and not w.startswith("I'"))
    return content_words([t for words in found for t in words])


def question_kind(words: list[str] | tuple[str, ...]) -> str | None:
    """The question word that opens the question, or YES_NO when an auxiliary verb does."""
    for w in words:
        if w in KINDS:
            return KINDS[w]
        if w in AUXILIARIES:
            return YES_NO
    return None


def question_count(text: str) -> int:
    return 1 + len(FOLLOW_UP.findall(text.strip().rstrip("?")))


def number_difference(a: Parsed, b: Parsed) -> bool:
    """Another number, a number on one side only, or the same number of another unit
    ("lose 5 kg" / "lose 50 kg" / "lose 5 lb")."""
    return a.numbers != b.numbers or (bool(a.numbers) and a.units != b.units)


def negation_difference(a: Parsed, b: Parsed) -> bool:
    """A negation on one side only ("is it safe" / "is it not safe"); "... or not?" asks
    both ways and is no negation."""
    return (a.negations > 0) != (b.negations > 0)


def _entities_unmatched(a: Parsed, b: Parsed) -> tuple[frozenset[str], frozenset[str]]:
    """Names of `a` that `b` never mentions, in any case or spelling, and those of `b` that
    `a` never mentions."""
    return (
        unmatched(a.entities, frozenset(b.tokens), b.compounds),
        unmatched(b.entities, frozenset(a.tokens), a.compounds),
    )


def entity_substitution(a: Parsed, b: Parsed) -> bool:
    """A name on one side stands where the other has another word: "pizza in Boston" /
    "pizza in Austin", "Southern Illinois University" / "Western Illinois University"."""
    only_a, only_b = _entities_unmatched(a, b)
    words_a, words_b = added_words(a, b)
    return bool(only_a and words_b) or bool(only_b and words_a)


def entity_added(a: Parsed, b: Parsed) -> int:
    """Names on one side only, with nothing in their place on the other: context ("Chrome" /
    "Google Chrome") or a narrower question ("family offices" / "... in Canada")."""
    only_a, only_b = _entities_unmatched(a, b)
    return len(only_a | only_b)


def cjk_difference(a: Parsed, b: Parsed) -> int:
    """CJK characters on one side only, apart from particles and question fillers."""

    def chars(p: Parsed) -> set[str]:
        return {t for t in p.content if is_cjk(t)}

    return len(chars(a) ^ chars(b))


def added_words(a: Parsed, b: Parsed) -> tuple[int, int]:
    """Content words of `a` that `b` lacks, and of `b` that `a` lacks: a qualifier, an item or
    another subject on one side ("cheap pet-friendly hotels")."""
    return len(_only_in(a, b)), len(_only_in(b, a))


def _only_in(a: Parsed, b: Parsed) -> frozenset[str]:
    """Content words of `a` that `b` lacks; numbers are `number_difference`'s to compare."""
    words = a.content - joined_pieces(a.tokens, a.compounds, b.content)
    return unmatched(frozenset(w for w in words if not is_number(w)), b.content, b.compounds)


def is_number(word: str) -> bool:
    return NUMBER.fullmatch(word) is not None or word in NUMBER_WORDS


def _positions(a: Parsed, b: Parsed) -> list[tuple[int, int]]:
    """(position in `a`, position in `b`) of each content word of `b` that `a` shares."""
    first_a = {t: i for i, t in reversed(list(enumerate(a.tokens))) if t in a.content}
    fuzzy = len(first_a) <= FUZZY_LIMIT
    pairs, seen = [], set()
    for j, t in enumerate(b.tokens):
        if t not in b.content or t in seen:
            continue
        seen.add(t)
        i = first_a.get(t)
        if i is None and fuzzy:
            i = next((k for w, k in first_a.items() if same_word(t, w)), None)
        if i is not None:
            pairs.append((i, j))
    return pairs


def role_swap(a: Parsed, b: Parsed) -> bool:
    """Two shared words trade places around a shared word that stays between them, and the
    rest keeps its order: "Spain beat Italy" / "Italy beat Spain", "a boy would tell a girl" /
    "a girl would tell a boy". A list in another order ("Clinton or Trump" / "Trump or
    Clinton") has no shared word between the two and is not a swap. Order alone cannot tell a
    clause moved to the front ("how do you motivate yourself when failing" / "when failing, how
    do you keep yourself motivated") from a swap: that is refused too, which costs a hit, never
    a wrong one."""
    order = [i for _, i in sorted((j, i) for i, j in _positions(a, b))]
    out_of_place = [k for k, (x, y) in enumerate(zip(order, sorted(order))) if x != y]
    return len(out_of_place) == 2 and out_of_place[1] - out_of_place[0] >= 2


def kind_difference(a: Parsed, b: Parsed) -> tuple[bool, bool]:
    """(a yes/no question against a wh- one; two wh- words that ask for other things, e.g.
    "where" / "how"). "What" and "how" are often the same question ("what is the best way to
    ..." / "how do I ..."), and so, in the labelled pairs, are "why" and another question word
    ("why did Trump win" / "how did Trump win"): neither counts."""
    kinds = {a.kind, b.kind}
    if len(kinds) == 1 or None in kinds:
        return False, False
    if YES_NO in kinds:
        return True, False
    return False, "why" not in kinds and kinds != {"what", "how"}


def question_difference(a: Parsed, b: Parsed) -> int:
    """How many more sub-questions one side asks ("What is happening in Venezuela and why?")."""
    return abs(a.questions - b.questions)
