"""Where two near-identical questions ask opposite or other things (issue 27 item 4).

An embedding reads "what to eat after a workout" and "... before a workout" as near-copies:
the words around the change are the same, and antonyms sit close in any distributional space
(before/after, buy/sell, best/worst score *higher* MiniLM cosines than most synonyms do). So
no cosine, of the questions or of the changed words, can tell "required" for "needed" from
"after" for "before". What can be read from the two texts is *how* they differ:

- **a word swapped for another**: aligned token by token, and the words that only hold a
  sentence together set aside, somewhere the two questions differ by one or two words against
  one or two, and a word there stands against one that is not a form of it (an inflection, a
  spelling variant, a listed synonym: `variant_form`) or is its `opposite_form` ("possible" /
  "impossible"). A rewording that changes more at once ("what are the common reasons for" /
  "what causes") is no swap: it is left to the verifier's model. A word or two for a word or
  two is how an opposite is asked ("for" / "against", "all" / "some", "speed up" / "slow
  down"), and a paraphrase that does it too ("needed" / "required", "get in touch with" / "get
  to contact") costs a hit, never a wrong one;
- **a negation more on one side**, even when both have one ("... without a code" / "how can't
  I ... without a code"): `Parsed.negations` counts them;
- **spans trading places**: the same words, two of them (or two names) in each other's place
  around something that gives them roles ("from Delhi to Mumbai" / "from Mumbai to Delhi",
  "convert PDF to Word"), unlike a list ("Trump or Clinton" / "Clinton or Trump");
- **a pointer out of the text**: "the question given below", "this", "the attached picture":
  the question's meaning lives in context the cache never sees, so two such questions that
  read alike may ask anything. They are served only with the same words (the namespace
  already holds the conversation before the question).

Pure functions of two `Parsed` questions, like `differences`.
"""

from __future__ import annotations

import difflib
from functools import lru_cache

from policies.semantic_cache.differences import Parsed, is_number, numbers
from policies.semantic_cache.text import FUNCTION_WORDS, FUZZY_LIMIT, same_word

# Words that point at something outside the question's text: a position in a document or a
# conversation, an attachment, or a demonstrative with nothing in the text to point at.
POINTERS = frozenset(
    {
        "this",
        "these",
        "those",
        "below",
        "above",
        "following",
        "attached",
        "attachment",
        "enclosed",
        "aforementioned",
        "aforesaid",
        "mentioned",
        "herein",
        "hereunder",
        "preceding",
        "foregoing",
        "thereof",
    }
)
# What may stand between two words that trade places without giving them roles: a list.
LIST_WORDS = frozenset({"and", "or", "nor", "vs", "versus", "v", "with", "between", "&"})
# Prefixes that negate or reverse a word, and pairs of endings that name opposite roles or
# measures on one stem: how English makes most of its antonyms without a new word.
OPPOSING_PREFIXES = ("un", "in", "im", "il", "ir", "dis", "non", "anti", "counter", "de", "mis", "over", "under")
OPPOSING_ENDINGS = (("ful", "less"), ("er", "ee"), ("or", "ee"))
_REVERSED = tuple((y, x) for x, y in OPPOSING_ENDINGS)
ARTICLES = frozenset({"a", "an", "the"})
# Function words that only hold a sentence together: pronouns, articles, auxiliaries and
# modals, question words, conjunctions, most prepositions. Set aside where two questions differ
# (`_differing`): "my" / "text" means the sentence was rebuilt, not that it asks something
# else. Every other function word names a side, an amount, a rank or a manner ("for" /
# "against", "some" / "all", "best" / "worst", "in" / "out", "way" / "reason"): against a
# content word it is a swap.
STRUCTURAL = frozenset(
    """a an the i you me my mine your yours we us our they them their he him his she her it its
    one ones one's s t u i'm it's there's im what's is are was were be been being am do does
    did doing have has had having can could should would will shall may might must what how why
    when where who which whom whose of at by with into onto about as than then and or so if
    that there here also really actually just very please""".split()
)
FROM, TOWARDS = frozenset({"from"}), frozenset({"to", "into", "towards", "toward", "onto"})
MAX_SWAP = 2  # the most words a side of a swap has: "speed up" / "slow down", "feel more" / "less"
MAX_ALIGNED = 256  # words a side up to which two texts are aligned word by word
MAX_SPAN = 4  # the longest span (in words) considered for trading places, and between them
MAX_TOKENS = 64  # longer texts are not searched for spans that trade places


@lru_cache(maxsize=1 << 16)  # a pure function of two words, asked for every pair of differing words
def variant_form(a: str, b: str) -> bool:
    """Two forms of one word: `same_word` (an inflection, a spelling variant, a listed synonym,
    a one-letter typo) or the same word with and without an apostrophe ("whats" / "what's"),
    unless the two are opposite forms ("employer" / "employee" is one letter apart)."""
    if opposite_form(a, b):
        return False
    return same_word(a, b) or a.replace("'", "") == b.replace("'", "")


def opposite_form(a: str, b: str) -> bool:
    """A WordNet-free antonym signal: one word is the other with a prefix that negates or
    reverses it ("possible" / "impossible", "like" / "dislike", "install" / "uninstall",
    "rated" / "overrated" / "underrated"), or the two share a stem and end in opposite roles or
    measures ("employer" / "employee", "careful" / "careless")."""
    short, long = sorted((a, b), key=len)
    if a == b or len(short) < 4:
        return False  # "to" / "into", "do" / "undo": too short to tell a prefix from a word
    for prefix in OPPOSING_PREFIXES:
        if long == prefix + short or (
            long.startswith(prefix)
            and short.startswith(tuple(OPPOSING_PREFIXES))
            and long[len(prefix) :] == short[_prefix_len(short) :]
        ):
            return True
    return any(_stem(a, x) is not None and _stem(a, x) == _stem(b, y) for x, y in OPPOSING_ENDINGS + _REVERSED)


def _stem(word: str, ending: str) -> str | None:
    """The word without `ending`, when it ends so and keeps three letters or more."""
    return word[: -len(ending)] if word.endswith(ending) and len(word) - len(ending) >= 3 else None


def _prefix_len(word: str) -> int:
    return next((len(p) for p in OPPOSING_PREFIXES if word.startswith(p)), 0)


def _differing(a: Parsed, b: Parsed) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    """The aligned places where the two differ: (words of `a`, words of `b`) for each, after
    dropping the words the other side has in one of its own differing places (moved, not
    changed) and the `STRUCTURAL` words, which hold a sentence together and mean nothing of
    their own ("legal" / "is unlawful" is a word against a word)."""
    ops = difflib.SequenceMatcher(None, a.tokens, b.tokens, autojunk=False).get_opcodes()
    changed = [(a.tokens[i1:i2], b.tokens[j1:j2]) for op, i1, i2, j1, j2 in ops if op != "equal"]
    loose_a = frozenset(w for x, _ in changed for w in x)
    loose_b = frozenset(w for _, y in changed for w in y)
    return [(_kept(x, loose_b), _kept(y, loose_a)) for x, y in changed]


def _kept(words: tuple[str, ...], other: frozenset[str]) -> tuple[str, ...]:
    """`words` less the structural ones and those `other` has in some form; past FUZZY_LIMIT
    words on the other side only equal words match (no quadratic time on a long text: a word
    left unmatched only makes a refusal more likely, never a wrong hit)."""
    fuzzy = len(other) <= FUZZY_LIMIT
    return tuple(
        w
        for w in words
        if w not in STRUCTURAL and w not in other and not (fuzzy and any(variant_form(w, o) for o in other))
    )


def word_swap(a: Parsed, b: Parsed) -> bool:
    """Whether `swapped_words` finds any; a text past `MAX_ALIGNED` words that is not the same
    words counts as one, unaligned: the alignment's time grows with the product of the two
    lengths, and a refused pair costs a hit, never a wrong one."""
    if max(len(a.tokens), len(b.tokens)) > MAX_ALIGNED:
        return a.tokens != b.tokens
    return bool(swapped_words(a, b))


def swapped_words(a: Parsed, b: Parsed) -> list[tuple[str, str]]:
    """Words of `a` that stand against other words of `b` where the two differ by at most
    `MAX_SWAP` words against at most as many (each word against its own when the counts are
    equal, against each of the other's when not): two content words that are not forms of one
    word, a content word against a function word that names a side, an amount or a rank ("for"
    / "against", "some" / "all", "best" / "worst"), a word against its `opposite_form`, or
    "from" against "to". Other function words trading for each other ("to" / "for", "what" /
    "how") are the verifier model's to weigh; a rewording that changes more words at once too."""
    return [
        (u, v)
        for x, y in _differing(a, b)
        if 0 < len(x) <= MAX_SWAP and 0 < len(y) <= MAX_SWAP
        for u, v in (zip(x, y) if len(x) == len(y) else ((u, v) for u in x for v in y))
        if _contrast(u, v)
    ]


def _contrast(x: str, y: str) -> bool:
    if is_number(x) and is_number(y):  # "zero factorial (0!)" / "zero factorial (1!)": a set
        return numbers([x]) != numbers([y])  # of numbers can stay the same; "five" is "5"
    if is_number(x) or is_number(y):
        return False  # a number on one side only: `differences.number_difference` refuses it
    if opposite_form(x, y):
        return True
    function_x, function_y = x in FUNCTION_WORDS, y in FUNCTION_WORDS
    if function_x and function_y:
        return {x, y} & FROM != set() and {x, y} & TOWARDS != set()
    return not (function_x or function_y) or (x if function_x else y) not in STRUCTURAL


def reversed_order(a: Parsed, b: Parsed) -> bool:
    """Two spans of the same words trade places, with something between them that gives them
    roles (not only a list word): "from Delhi to New York" / "from New York to Delhi",
    "convert land to non-agricultural land" / "convert non-agricultural land to land", "Spain
    beat Italy" / "Italy beat Spain"."""
    x, y = a.tokens, b.tokens
    if x == y or len(x) > MAX_TOKENS or sorted(x) != sorted(y):
        return False
    start = next(i for i in range(len(x)) if x[i] != y[i])
    for n in range(1, MAX_SPAN + 1):
        for gap in range(0, MAX_SPAN + 1):
            for m in range(1, MAX_SPAN + 1):
                end = start + n + gap + m
                first, between, last = x[start : start + n], x[start + n : end - m], x[end - m : end]
                if end > len(x) or first == last or set(between) - ARTICLES <= LIST_WORDS:
                    continue  # a list in another order ("Trump or Clinton") asks the same
                if y[start:end] == last + between + first and x[end:] == y[end:]:
                    return True
    return False


def points_outside(p: Parsed) -> bool:
    """Whether the question points at context its text does not carry."""
    return any(w in POINTERS for w in p.tokens)
