"""Words of a question, as the verifier compares them: tokens in any script, content words,
and when two different words still mean the same thing (an inflection, a spelling variant, a
listed synonym, a compound written apart).

Pure functions over strings. CJK text has no spaces, so each CJK character is a token of
its own: "怎么学习日语" and "怎么学习韩语" then differ in one token, as they should.
"""

from __future__ import annotations

import re
from functools import lru_cache

CJK_CHAR = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]")
TOKEN = re.compile(r"\d+(?:[.,]\d+)*|[^\W_]+(?:['’][^\W\d_]+)?")

# Words that carry no information need of their own: differing in them changes no answer.
FUNCTION_WORDS = frozenset(
    {
        "a",
        "an",
        "the",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "am",
        "do",
        "does",
        "did",
        "doing",
        "i",
        "you",
        "me",
        "my",
        "mine",
        "your",
        "yours",
        "we",
        "us",
        "our",
        "they",
        "them",
        "their",
        "he",
        "him",
        "his",
        "she",
        "her",
        "it",
        "its",
        "one",
        "ones",
        "someone",
        "somebody",
        "anyone",
        "anybody",
        "one's",
        "to",
        "of",
        "in",
        "on",
        "for",
        "at",
        "by",
        "from",
        "with",
        "into",
        "onto",
        "about",
        "as",
        "than",
        "then",
        "and",
        "or",
        "so",
        "if",
        "this",
        "that",
        "these",
        "those",
        "there",
        "here",
        "can",
        "could",
        "should",
        "would",
        "will",
        "shall",
        "may",
        "might",
        "must",
        "have",
        "has",
        "had",
        "having",
        "get",
        "got",
        "getting",
        "some",
        "any",
        "what",
        "what's",
        "how",
        "why",
        "when",
        "where",
        "who",
        "which",
        "whom",
        "whose",
        "s",
        "t",
        "also",
        "really",
        "actually",
        "ever",
        "just",
        "very",
        "possible",
        "possibly",
        "please",
        "way",
        "ways",
        "best",
        "good",
        "go",
        "going",
        "u",
        "i'm",
        "it's",
        "there's",
        "im",
        "thing",
        "things",
        "know",
        "tell",
        "explain",
        "example",
        "examples",
        "exactly",
        "kind",
        "type",
        # negations: `differences.negation_difference` compares them, not as words on one side
        "not",
        "no",
        "never",
        "don't",
        "doesn't",
        "didn't",
        "isn't",
        "aren't",
        "can't",
        "cannot",
        "won't",
    }
)
# CJK particles and question fillers ("呢", "吗", "の", "か"): they change no answer either.
CJK_FILLERS = frozenset("的了吗呢吧啊呀么嗎是在我你请請问問一个個有这這那哪什怎如何为為はがをにでのかねよもとへや")
# Synonyms common in questions, each group's first word the one the others are read as.
SYNONYM_GROUPS = (
    ("buy", "purchase"),
    ("start", "begin", "commence"),
    ("movie", "film"),
    ("big", "large"),
    ("small", "little", "tiny"),
    ("job", "career"),
    ("quick", "fast", "rapid"),
    ("quickly", "fast", "rapidly"),
    ("earn", "make"),
    ("money", "cash"),
    ("difference", "different", "differ", "vs", "versus"),
    ("improve", "increase", "boost", "enhance"),
    ("cheap", "inexpensive", "affordable"),
    ("mobile", "cell", "phone", "smartphone", "cellphone"),
    ("pc", "computer", "laptop"),
    ("use", "using", "usage"),
    ("mean", "meaning"),
    ("top", "best"),
    ("like", "feel"),
    ("site", "website"),
    ("recommend", "suggest", "recommendation", "suggestion"),
    ("benefit", "advantage", "pro"),
    ("disadvantage", "drawback", "con"),
    ("easy", "easiest", "simple"),
    ("learn", "learning"),
    ("people", "person", "someone"),
    ("important", "essential"),
    ("usa", "us", "america", "american", "americans"),
    ("rupee", "rupees", "rs", "inr"),
)
SYNONYMS = {word: group[0] for group in SYNONYM_GROUPS for word in group}
# Endings that inflect a word without changing what it names ("hotel"/"hotels", "make"/"making",
# "study"/"studies"): two words that differ only in these after a shared stem are one word.
ENDINGS = frozenset(
    {
        "",
        "s",
        "es",
        "e",
        "ed",
        "d",
        "ing",
        "er",
        "ers",
        "ly",
        "y",
        "ies",
        "ied",
        "ment",
        "ments",
        "ness",
        "ion",
        "ions",
        "ation",
        "ations",
        "al",
        "ally",
        "ity",
        "ic",
        "ical",
        "a",
        "n",
        "ns",
        "an",
        "ans",
        "ian",
        "ians",
        "ese",
    }
)  # India/Indian, China/Chinese
SHORT_ENDINGS = frozenset({"", "s", "es", "ing", "ed"})  # all a stem of three letters may take
FUZZY_LIMIT = 64  # content words per side up to which inflections, typos and synonyms are matched
BRITISH = (
    ("our", "or"),
    ("ise", "ize"),
    ("ising", "izing"),
    ("ised", "ized"),
    ("isation", "ization"),
    ("yse", "yze"),
    ("tre", "ter"),
    ("ogue", "og"),
)


def tokens(text: str) -> list[str]:
    """Lower-cased words and numbers in any script; each CJK character is a token."""
    spaced = CJK_CHAR.sub(lambda m: f" {m.group(0)} ", text.lower().replace("’", "'"))
    return TOKEN.findall(spaced)


def is_cjk(token: str) -> bool:
    return CJK_CHAR.fullmatch(token) is not None


def content_words(words: list[str] | tuple[str, ...]) -> frozenset[str]:
    """The words that can change an answer: all but the function words and punctuation."""
    return frozenset(w for w in words if w not in FUNCTION_WORDS and w not in CJK_FILLERS)


def _inflections(a: str, b: str) -> bool:
    """One stem with two endings, allowing a doubled last consonant ("run"/"running")."""
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    if n < 3:
        return False
    ends = {a[n:], b[n:]}
    allowed = ENDINGS if n >= 4 else SHORT_ENDINGS
    if ends <= allowed or (len(ends) == 2 and "e" in ends and ends - {"e"} <= {"ing", "ed", "er", "ers"}):
        return True  # "make" / "making": the stem drops its e
    doubled = {e[1:] if e and e[0] == a[n - 1] else e for e in ends}
    return doubled <= SHORT_ENDINGS | {"er"}


def _edit_distance_at_most_one(a: str, b: str) -> bool:
    if abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diffs = [i for i in range(len(a)) if a[i] != b[i]]
        return len(diffs) <= 1 or (
            len(diffs) == 2 and diffs[1] == diffs[0] + 1 and a[diffs[0]] == b[diffs[1]] and a[diffs[1]] == b[diffs[0]]
        )
    short, long = (a, b) if len(a) < len(b) else (b, a)
    i = next((k for k in range(len(short)) if short[k] != long[k]), len(short))
    return short[i:] == long[i + 1 :]


def _synonym(word: str) -> str:
    """The word its synonym group is read as, for the word or its singular."""
    if word in SYNONYMS:
        return SYNONYMS[word]
    singular = word[:-3] + "y" if word.endswith("ies") else word[:-1] if word.endswith("s") else word
    return SYNONYMS.get(singular, singular)


def _british(word: str) -> str:
    for uk, us in BRITISH:
        if word.endswith(uk):
            return word[: -len(uk)] + us
    return word


@lru_cache(maxsize=1 << 16)  # a pure function of two words; the name checks ask it for every pair
def same_word(a: str, b: str) -> bool:
    """Whether two words count as one: inflections of one stem, a listed synonym, British and
    American spelling, or a one-letter typo in a word of six letters or more ("recieve").
    Numbers and CJK characters only ever equal themselves."""
    if a == b:
        return True
    if a[0].isdigit() or b[0].isdigit() or is_cjk(a) or is_cjk(b):
        return False
    if _synonym(a) == _synonym(b) or _british(a) == _british(b) or _inflections(a, b):
        return True
    return min(len(a), len(b)) >= 6 and _edit_distance_at_most_one(a, b)


def compounds(words: list[str] | tuple[str, ...]) -> frozenset[str]:
    """Adjacent words run together ("web site" -> "website", "e commerce" -> "ecommerce")."""
    pairs = {a + b for a, b in zip(words, words[1:])}
    return frozenset(pairs | {a + b + c for a, b, c in zip(words, words[1:], words[2:])})


def joined_pieces(words: list[str] | tuple[str, ...], joined: frozenset[str], other: frozenset[str]) -> frozenset[str]:
    """The words that, run together with a neighbour, make a word of `other` ("e", "commerce"
    when the other side writes "ecommerce"); `joined` is `compounds(words)`."""
    found = joined & other
    if not found:
        return frozenset()
    pieces: set[str] = set()
    for n in (2, 3):
        for i in range(len(words) - n + 1):
            if "".join(words[i : i + n]) in found:
                pieces.update(words[i : i + n])
    return frozenset(pieces)


def unmatched(side: frozenset[str], other: frozenset[str], other_compounds: frozenset[str]) -> frozenset[str]:
    """The words of `side` that `other` lacks under `same_word`, or as a compound written
    apart or hyphenated ("ecommerce" / "e-commerce"). Past FUZZY_LIMIT words on either side
    only equal words match: a long prompt costs no quadratic time, and a word it fails to
    match only counts as a difference (a refusal, never a wrong hit)."""
    missing = [w for w in side if w not in other and w not in other_compounds]
    if len(side) > FUZZY_LIMIT or len(other) > FUZZY_LIMIT:
        return frozenset(missing)
    return frozenset(w for w in missing if not any(same_word(w, o) for o in other))
