"""The verifier's detectors, each on crafted near-misses it must see and on true paraphrases it
must let pass (no embedding involved: pure functions of the two texts)."""

from __future__ import annotations

import pytest

from policies.semantic_cache import differences as d
from policies.semantic_cache.differences import Parsed
from policies.semantic_cache.pair_features import normalise, vetoed
from policies.semantic_cache.text import same_word, tokens

# Pairs that ask the same thing: no detector may fire on them.
PARAPHRASES = [
    ("How do I learn Python quickly?", "How can I learn Python fast?"),
    ("What is the best way to learn Python?", "How do I learn python?"),
    ("Which is the best website to buy shoes?", "Which is the best site to purchase shoes?"),
    ("What are the colours of the rainbow?", "What are the colors of the rainbow?"),
    ("How do I start an e-commerce business?", "How do I start an ecommerce business?"),
    ("Who is better, Trump or Clinton?", "Who is better, Clinton or Trump?"),
    ("How do I lose five kg?", "How do I lose 5 kg?"),
    ("What does Russia think of China?", "What do Russians think of China?"),
    ("如何学习日语？", "如何学习日语呢"),
    ("Is coffee healthy or not?", "Is coffee healthy?"),
    ("How many hotels are there in Rome?", "How many hotel are in rome"),
]


def parse(a: str, b: str) -> tuple[Parsed, Parsed]:
    return Parsed.of(a), Parsed.of(b)


@pytest.mark.parametrize("a, b", PARAPHRASES)
def test_paraphrases_pass_every_detector(a: str, b: str) -> None:
    pa, pb = parse(a, b)
    assert not vetoed(pa, pb)
    assert d.added_words(pa, pb) == (0, 0)
    assert d.entity_added(pa, pb) == 0 and not d.role_swap(pa, pb)
    assert d.kind_difference(pa, pb) == (False, False) and d.question_difference(pa, pb) == 0


@pytest.mark.parametrize(
    "a, b, differ",
    [
        ("How do I lose 5 kg?", "How do I lose 50 kg?", True),
        ("How do I lose 5 kg?", "How do I lose 5 lb?", True),  # the same number of another unit
        ("How do I lose 5 kg?", "How do I lose weight?", True),  # a number on one side only
        ("What is new in Windows 8.1?", "What is new in Windows 8?", True),
        ("How much is 1,000 dollars in rupees?", "How much is 1000 dollars in rupees?", False),
        ("How do I lose five kg?", "How do I lose 5 kg?", False),
    ],
)
def test_numbers_and_units(a: str, b: str, differ: bool) -> None:
    assert d.number_difference(*parse(a, b)) is differ


@pytest.mark.parametrize(
    "a, b, substituted, added",
    [
        ("What is the best pizza in Boston?", "What is the best pizza in Austin?", True, 2),
        ("Strengths of Southern Illinois University?", "Strengths of Western Illinois University?", True, 2),
        ("Pros and cons of Ballot Measure L?", "Pros and cons of Ballot Measure E?", True, 2),
        ("How do I block sites on Chrome?", "How do I block sites on Google Chrome?", False, 1),  # context only
        ("What is the best pizza in boston?", "What is the best pizza in Boston?", False, 0),  # case is no name
    ],
)
def test_named_entities(a: str, b: str, substituted: bool, added: int) -> None:
    pa, pb = parse(a, b)
    assert d.entity_substitution(pa, pb) is substituted
    assert d.entity_added(pa, pb) == added


@pytest.mark.parametrize(
    "a, b, differ",
    [
        ("如何学习日语", "如何学习韩语", True),  # Japanese / Korean: one character
        ("北京的天气怎么样", "上海的天气怎么样", True),
        ("東京の天気は", "大阪の天気は", True),
        ("如何学习日语？", "如何学习日语呢", False),  # a question particle changes nothing
    ],
)
def test_cjk_characters(a: str, b: str, differ: bool) -> None:
    assert (d.cjk_difference(*parse(a, b)) > 0) is differ
    assert vetoed(*parse(a, b)) is differ


def test_cjk_text_is_split_into_characters() -> None:
    assert tokens("怎么学习Python？") == ["怎", "么", "学", "习", "python"]
    assert normalise("如何学习日语") != normalise("如何学习韩语")  # never "the same words" by accident


@pytest.mark.parametrize(
    "a, b, swapped",
    [
        ("Why did Spain beat Italy?", "Why did Italy beat Spain?", True),
        ("What does Russia think about China?", "What does China think about Russia?", True),
        ("How is Ronaldo better than Messi?", "How is Messi better than Ronaldo?", True),
        ("Secrets a boy would rarely share with a girl?", "Secrets a girl would rarely share with a boy?", True),
        ("Who is better, Trump or Clinton?", "Who is better, Clinton or Trump?", False),  # nothing between
        ("What is the capital city of France?", "France's capital city is what?", False),  # rebuilt, no swap
    ],
)
def test_swapped_roles(a: str, b: str, swapped: bool) -> None:
    assert d.role_swap(*parse(a, b)) is swapped


@pytest.mark.parametrize(
    "a, b, added",
    [
        ("cheap hotels in Rome", "cheap pet-friendly hotels in Rome", (0, 2)),
        ("Do women enjoy sex?", "Do women always enjoy sex?", (0, 1)),
        ("Would you date a nerd guy?", "Would you date a nerd girl?", (1, 1)),
        ("What are the benefits of hotels?", "What are the advantages of a hotel?", (0, 0)),  # synonym, plural
        ("How do I recieve payments?", "How do I receive payments?", (0, 0)),  # a typo
    ],
)
def test_qualifiers_added_or_dropped(a: str, b: str, added: tuple[int, int]) -> None:
    assert d.added_words(*parse(a, b)) == added


@pytest.mark.parametrize(
    "a, b, differ",
    [
        ("Is it safe to drink coffee?", "Is it not safe to drink coffee?", True),
        ("Why can't I sleep at night?", "Why can I sleep at night?", True),
        ("How do I become selfish?", "How do I not be selfish?", True),
        ("Is coffee healthy or not?", "Is coffee healthy?", False),  # asks both ways
    ],
)
def test_negation(a: str, b: str, differ: bool) -> None:
    assert d.negation_difference(*parse(a, b)) is differ


@pytest.mark.parametrize(
    "a, b, expected",
    [
        ("Why are cats narcissists?", "Are cats narcissists?", (True, False)),
        ("Where can I learn Hindi?", "How can I learn Hindi?", (False, True)),
        ("Who invented the radio?", "When was the radio invented?", (False, True)),
        ("What is the best way to learn Hindi?", "How do I learn Hindi?", (False, False)),
        ("Why did Trump win the election?", "How did Trump win the election?", (False, False)),
    ],
)
def test_question_kind(a: str, b: str, expected: tuple[bool, bool]) -> None:
    assert d.kind_difference(*parse(a, b)) == expected


@pytest.mark.parametrize(
    "a, b, extra",
    [
        ("What is happening in Venezuela and why?", "What is happening in Venezuela?", 1),
        ("Do you believe in fate? If yes, then why?", "Do you believe in fate?", 1),
        ("What are saturated fats? What are some examples?", "What are saturated fats?", 1),
        ("What are the pros and cons of coffee?", "What are the pros and cons of tea?", 0),
    ],
)
def test_sub_questions(a: str, b: str, extra: int) -> None:
    assert d.question_difference(*parse(a, b)) == extra


@pytest.mark.parametrize(
    "a, b, same",
    [
        ("hotel", "hotels", True),
        ("study", "studies", True),
        ("make", "making", True),
        ("run", "running", True),
        ("colour", "color", True),
        ("organise", "organize", True),
        ("recieve", "receive", True),
        ("buy", "purchase", True),
        ("india", "indian", True),
        ("boston", "austin", False),
        ("car", "care", False),
        ("5", "50", False),
        ("guy", "girl", False),
    ],
)
def test_same_word(a: str, b: str, same: bool) -> None:
    assert same_word(a, b) is same
