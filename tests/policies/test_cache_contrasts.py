"""The contrast checks (issue 27 item 4): a question that differs from a stored one by a word of
opposite or other meaning, by two spans trading places, by a negation more, or that points at
context its text lacks, is refused; a rewording is not. Pure functions of the two texts.

Most word pairs here are in no list the checks were tuned on (bench/data/opposite_pairs.txt
was the tuning list): the checks read how two texts differ, not which words they use."""

from __future__ import annotations

import pytest

from policies.semantic_cache import contrasts as c
from policies.semantic_cache.differences import Parsed
from policies.semantic_cache.pair_features import vetoed


def refused(a: str, b: str) -> bool:
    return vetoed(Parsed.of(a), Parsed.of(b)) and vetoed(Parsed.of(b), Parsed.of(a))


# (stored, asked): one word of opposite or other meaning. The first few are the issue's own.
OPPOSITES = [
    ("What should I eat after a workout to gain muscle?", "What should I eat before a workout to gain muscle?"),
    ("Where can I buy old coins in Delhi?", "Where can I sell old coins in Delhi?"),
    ("What are the best programming languages to learn?", "What are the worst programming languages to learn?"),
    ("What are the arguments for the death penalty?", "What are the arguments against the death penalty?"),
    ("Can I take ibuprofen with coffee?", "Cannot I take ibuprofen with coffee?"),
    # pairs from no list
    ("Why do cats purr when they are happy?", "Why do cats purr when they are anxious?"),
    ("How do I make my hair thicker?", "How do I make my hair thinner?"),
    ("Which foods raise blood pressure?", "Which foods lower blood pressure?"),
    ("How do I log in to Gmail on my phone?", "How do I log out of Gmail on my phone?"),
    ("How do I turn on location services on an iPhone?", "How do I turn off location services on an iPhone?"),
    ("What is the most dangerous animal in Australia?", "What is the least dangerous animal in Australia?"),
    ("Why are introverts good at writing?", "Why are extroverts good at writing?"),
    ("How can I speed up my laptop?", "How can I slow down my laptop?"),
    ("What is the boiling point of salt water?", "What is the freezing point of salt water?"),
    ("What do landlords hate most about tenants?", "What do tenants hate most about landlords?"),  # roles
    ("What are the symptoms of a vitamin D excess?", "What are the symptoms of a vitamin D deficiency?"),
    ("How do you become an optimist?", "How do you become a pessimist?"),
    ("Is it possible to learn Spanish in six months?", "Is it impossible to learn Spanish in six months?"),
    ("Why is the movie Inception overrated?", "Why is the movie Inception underrated?"),
    ("What should an employer ask in an interview?", "What should an employee ask in an interview?"),
    ("Are all snakes venomous?", "Are some snakes venomous?"),  # quantifiers
    ("Do dogs always wag their tails when happy?", "Do dogs sometimes wag their tails when happy?"),
    ("Why do most people dislike mondays?", "Why do few people dislike mondays?"),
    ("How do I learn Python for data science?", "How do I learn java for data science?"),  # other thing
    ("What is the best time to visit Goa in winter?", "What is the best time to visit Goa in summer?"),
    ("How do I stay motivated while studying alone?", "How do I stay motivated while studying together?"),
    ("What is a good gift for a ten year old boy?", "What is a good gift for a ten year old girl?"),
    ("How do I uninstall Skype on Windows?", "How do I install Skype on Windows?"),
    ("Why are my plants growing so fast?", "Why are my plants growing so slowly?"),
    ("How do I encrypt a PDF file?", "How do I decrypt a PDF file?"),
    ("Is coffee good for your heart?", "Is coffee bad for your heart?"),
]
ROUTES = [
    (
        "What is the cheapest way to travel from Delhi to Mumbai?",
        "What is the cheapest way to travel from Mumbai to Delhi?",
    ),
    (
        "How long is the flight from New York to San Francisco?",
        "How long is the flight from San Francisco to New York?",
    ),
    ("How do I convert a PDF to a Word file?", "How do I convert a Word file to a PDF?"),
    ("How do I translate English to French quickly?", "How do I translate French to English quickly?"),
    ("Is it cheaper to ship from China into India?", "Is it cheaper to ship from India into China?"),
    ("Why did Spain beat Italy in 2012?", "Why did Italy beat Spain in 2012?"),
    ("How do I move my photos from iCloud to Google Photos?", "How do I move my photos from Google Photos to iCloud?"),
]
POINTERS = [
    ("What is the answer to the question given below?", "What is the answer to the question given above?"),
    ("Can someone solve the following equation?", "Can someone solve the following equations?"),
    ("What does this error mean?", "What does this message mean?"),
    ("Is the attached contract legally valid?", "Is the attached agreement legally valid?"),
    ("Who painted this picture?", "Who painted these pictures?"),
    ("What is the meaning of the aforementioned clause?", "What does the aforementioned clause mean?"),
]
NUMBERS = [  # the set of numbers stays the same: only the aligned number changed
    ("Why does zero factorial (0!) equal one (1)?", "Why does zero factorial (1!) equal one (1)?"),
]
NEGATIONS = [
    ("How can I unlock my iPhone without a passcode?", "How can't I unlock my iPhone without a passcode?"),
    ("Why don't cats like water?", "Why don't cats never like water?"),
]
# Rewordings that ask the same: none of the contrast checks may refuse them.
REWORDINGS = [
    ("How do I learn Python quickly?", "How can I learn Python fast?"),
    ("What is the best way to learn Python?", "How do I learn python?"),
    ("Who is better, Trump or Clinton?", "Who is better, Clinton or Trump?"),
    (
        "What is the difference between a virus and a bacterium?",
        "What is the difference between a bacterium and a virus?",
    ),
    ("How do I lose five kg?", "How do I lose 5 kg?"),
    ("What are some tips for learning guitar?", "What are some tips to learn guitar?"),
    ("What are the common reasons for hair loss?", "What causes hair loss?"),
    ("Whats the point of life?", "What's the point of life?"),
    (
        "What is the best financial investment you have ever made?",
        "What is the best financial investment you've ever made?",
    ),
    ("Which is the best website to buy shoes?", "Which is the best site to purchase shoes?"),
    ("How do I start an e-commerce business?", "How do I start an ecommerce business?"),
    ("Is coffee healthy or not?", "Is coffee healthy?"),
    ("How can I improve my English speaking skills?", "How can I improve my spoken English skills?"),
    ("What is the capital of Australia?", "What is the capital city of Australia?"),
]


@pytest.mark.parametrize("stored, asked", OPPOSITES + ROUTES + POINTERS + NUMBERS + NEGATIONS)
def test_a_question_that_asks_something_else_is_refused(stored: str, asked: str) -> None:
    assert refused(stored, asked)


@pytest.mark.parametrize("a, b", REWORDINGS)
def test_rewordings_pass_the_contrast_checks(a: str, b: str) -> None:
    pa, pb = Parsed.of(a), Parsed.of(b)
    for x, y in ((pa, pb), (pb, pa)):
        assert c.swapped_words(x, y) == [] and not c.reversed_order(x, y)
        assert not c.points_outside(x) and x.negations == y.negations


@pytest.mark.parametrize(
    "stored, asked, swap",
    [
        ("What should I eat after a workout?", "What should I eat before a workout?", ("after", "before")),
        ("What are the arguments for Brexit?", "What are the arguments against Brexit?", ("for", "against")),
        ("Are all birds able to fly?", "Are some birds able to fly?", ("all", "some")),
        ("How do I log in?", "How do I log out?", ("in", "out")),
        ("Which flights leave from Paris?", "Which flights leave to Paris?", ("from", "to")),
        ("How do I speed up my laptop?", "How do I slow down my laptop?", ("speed", "slow")),
        ("Why does it hurt so much?", "Why does walking hurt so much?", None),  # rebuilt around "it", not swapped
        ("What are the major principles of Sikhism?", "What are the major principles in Sikhism?", None),
        ("How do I become a doctor?", "How do I be a doctor?", None),  # a copula: left to the model
        # a rewording the check refuses: a hit lost, never a wrong one
        ("How do I get in touch with a hacker?", "How do I get to contact a hacker?", ("touch", "contact")),
        (
            "Is bidding legal in India?",
            "Is bidding is unlawful in India?",
            ("legal", "unlawful"),
        ),  # "is" holds no meaning
        ("How do I make crutches feel more comfortable?", "How do I make crutches less comfortable?", ("feel", "less")),
    ],
)
def test_which_words_count_as_swapped(stored: str, asked: str, swap: tuple[str, str] | None) -> None:
    found = c.swapped_words(Parsed.of(stored), Parsed.of(asked))
    assert found[:1] == ([swap] if swap else [])


@pytest.mark.parametrize(
    "a, b, opposite, variant",
    [
        ("possible", "impossible", True, False),
        ("like", "dislike", True, False),
        ("install", "uninstall", True, False),
        ("rated", "overrated", True, False),
        ("overrated", "underrated", True, False),
        ("employer", "employee", True, False),  # one letter apart, like a typo: not one word
        ("careful", "careless", True, False),
        ("trainer", "trainee", True, False),
        ("to", "into", False, False),  # too short to read a prefix
        ("hotel", "hotels", False, True),
        ("recieve", "receive", False, True),
        ("colour", "color", False, True),
        ("whats", "what's", False, True),
        ("unlock", "unlock", False, True),  # a word that starts like a negation is still itself
    ],
)
def test_opposite_forms(a: str, b: str, opposite: bool, variant: bool) -> None:
    assert c.opposite_form(a, b) is opposite
    assert c.variant_form(a, b) is variant


def test_a_question_with_the_same_words_is_served_even_when_it_points_elsewhere() -> None:
    """The namespace holds the conversation before the question, so the same words with the
    same context are the same question; only other words are refused."""
    from policies.semantic_cache.verifier import Verifier

    verifier = Verifier.load()
    same = Parsed.of("What is the answer to the question given below?")
    assert verifier.accepts(Parsed.of("what is the answer to the question given below"), same, 1.0, 0.05)
    assert verifier.cosine_needed(Parsed.of("What's the answer to the question given below?"), same, 0.05) is None


def test_a_long_prompt_is_not_searched_for_spans_trading_places() -> None:
    words = " ".join(f"w{i}" for i in range(c.MAX_TOKENS))
    a, b = Parsed.of(f"from alpha to beta {words}"), Parsed.of(f"from beta to alpha {words}")
    assert not c.reversed_order(a, b)  # bounded work; such a pair is left to the other checks
    assert c.reversed_order(Parsed.of("from alpha to beta"), Parsed.of("from beta to alpha"))


def test_a_long_text_is_not_aligned_and_differing_counts_as_a_swap() -> None:
    words = " ".join(f"w{i}" for i in range(c.MAX_ALIGNED))
    long, other = Parsed.of(f"why {words}"), Parsed.of(f"how {words}")
    assert c.word_swap(long, other)  # "why" / "how" alone would not be one: unaligned, refused
    assert not c.word_swap(long, Parsed.of(f"Why {words}?"))
    assert not c.word_swap(Parsed.of("why is it so"), Parsed.of("how is it so"))
