"""Scorers, agreement, the learned model (it must generalize to unseen queries), replay."""

from __future__ import annotations

import random
from decimal import Decimal

import pytest

from policies.agreement import answers_agree, token_f1
from policies.router import Candidate, choose
from policies.scorers import Scored
from policies.scorers.answer_features import arithmetic_checks, final_number
from policies.scorers.learned import Example, LogisticModel, auc, train
from policies.scorers.logprob import mean_token_probability
from policies.scorers.rules import rule_violation


@pytest.mark.parametrize(
    "item, expected",
    [
        (Scored("q", "The answer is 4."), None),
        (Scored("q", "   "), "empty"),
        (Scored("q", "", has_tool_calls=True), None),
        (Scored("q", "The answer is", finish_reason="length"), "truncated"),
        (Scored("q", "I'm sorry, but I can't help with that."), "refusal"),
        (Scored("q", "As an AI, I cannot answer."), "refusal"),
        (Scored("q", "Sorry to hear that! Here is the fix: restart."), None),
        (Scored("q", '{"a": 1}', wants_json=True), None),
        (Scored("q", "a: 1", wants_json=True), "invalid_json"),
        (Scored("q", "[1, 2]", wants_json=True), "invalid_json"),
    ],
)
def test_rule_violation(item: Scored, expected: str | None) -> None:
    assert rule_violation(item) == expected


@pytest.mark.parametrize(
    "logprobs, expected",
    [
        (None, None),
        ((), None),
        ((0.0, 0.0), 1.0),
        ((-1.0,), 0.3679),
        ((-0.1, -0.3), 0.8187),
    ],
)
def test_mean_token_probability(logprobs, expected) -> None:
    value = mean_token_probability(logprobs)
    assert value == expected if expected is None else abs(value - expected) < 1e-4


@pytest.mark.parametrize(
    "a, b, expected",
    [
        ("so 3 + 4 = 7\n#### 7", "The total is 7.", True),
        ("#### 1,200", "1200 dollars", True),
        ("#### 12", "The answer is 13", False),
        ("Paris is the capital of France", "The capital of France is Paris", True),
        ("Paris is the capital of France", "Berlin is the largest city of Germany", False),
    ],
)
def test_answers_agree(a: str, b: str, expected: bool) -> None:
    assert answers_agree(a, b) is expected


def test_token_f1_bounds() -> None:
    assert token_f1("", "") == 1.0 and token_f1("a b", "c d") == 0.0 and token_f1("a b", "a b") == 1.0


@pytest.mark.parametrize(
    "answer, right, wrong, final",
    [
        ("2 * 3 = 6 and <<6+1=7>>7\n#### 7", 2, 0, 7.0),
        ("2 * 3 = 7\n#### 7", 0, 1, 7.0),
        ("<<10/4=2.5>> so 2.5", 1, 0, 2.5),
        ("no numbers here", 0, 0, None),
    ],
)
def test_arithmetic_checks(answer: str, right: int, wrong: int, final: float | None) -> None:
    assert arithmetic_checks(answer) == (right, wrong)
    assert final_number(answer) == final


def synthetic(rng: random.Random, n: int) -> list[Example]:
    """Word problems whose answers are right exactly when their arithmetic is: a learnable
    pattern that holds across problems the model never saw."""
    out = []
    for _ in range(n):
        a, b = rng.randint(2, 99), rng.randint(2, 99)
        good = rng.random() < 0.6
        result = a * b if good else a * b + rng.randint(1, 9)
        question = f"A box holds {a} rows of {b} {rng.choice(['apples', 'pens', 'coins', 'cards'])}. How many?"
        answer = f"There are {a} rows of {b}, so {a} * {b} = {result}.\n#### {result}"
        if not good and rng.random() < 0.5:
            answer = f"Maybe about {result}?"
        out.append(Example(Scored(question, answer), good))
    return out


def test_learned_scorer_generalizes_to_held_out_queries(tmp_path) -> None:
    rng = random.Random(7)
    model = train(synthetic(rng, 300))
    held_out = synthetic(rng, 200)
    scores = [
        model.probability(__import__("policies.scorers.answer_features", fromlist=["features"]).features(e.item))
        for e in held_out
    ]
    assert auc(scores, [e.label for e in held_out]) > 0.9
    path = tmp_path / "m.json"
    model.save(path)
    again = LogisticModel.load(path)
    assert again.probability([0.0] * len(again.names)) == pytest.approx(model.probability([0.0] * len(model.names)))


def test_training_needs_both_labels() -> None:
    with pytest.raises(ValueError):
        train([Example(Scored("q", "a"), True)] * 3)


@pytest.mark.parametrize(
    "scores, labels, expected",
    [
        ([0.9, 0.8, 0.1], [True, True, False], 1.0),
        ([0.1, 0.9], [True, False], 0.0),
        ([0.5, 0.5], [True, False], 0.5),
    ],
)
def test_auc(scores, labels, expected) -> None:
    assert auc(scores, labels) == expected


@pytest.mark.parametrize(
    "max_cost, expected",
    [
        (None, "large"),
        (Decimal("1"), "large"),
        (Decimal("0.01"), "medium"),
        (Decimal("0.002"), "small"),
        (Decimal("0.0001"), None),
    ],
)
def test_router_choose(max_cost: Decimal | None, expected: str | None) -> None:
    candidates = [
        Candidate("small", 1, Decimal("0.001")),
        Candidate("medium", 2, Decimal("0.005")),
        Candidate("medium-pricey", 2, Decimal("0.008")),
        Candidate("large", 3, Decimal("0.05")),
    ]
    chosen = choose(candidates, max_cost)
    assert (chosen.name if chosen else None) == expected
