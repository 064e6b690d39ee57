"""Features of a (query, answer) pair for the learned scorer: numbers, not words.

FrugalGPT scores (query, answer) with a small model. Here the model is a logistic regression
over these hand-made features, which carry over to problems the scorer never saw: hashed word
n-grams were tried on the GSM8K dev data and generalized worse across folds (cross-validated
AUC 0.66 against 0.74 for these alone), because they memorize topics instead of answer shape.

The features describe how an answer was reached — its length and structure, whether its
arithmetic checks out, whether it uses the question's numbers, whether the final number looks
like a clean result — which is what separates a weak model's right answers from its wrong
ones on reasoning tasks, and is neutral (near-constant) on answers without numbers. The last
few say what the question is about (policies/scorers/topic.py): its MiniLM vector on a fixed
basis, which tells the kinds of question a cheap model gets wrong more often.
"""

from __future__ import annotations

import math
import re

from policies.scorers import Scored
from policies.scorers.topic import AXES, basis

NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")
ANNOTATION = re.compile(r"<<([^=<>]+)=([^<>]+)>>")  # calculator annotations: <<2*60=120>>
EQUATION = re.compile(r"(\d[\d,.]*)\s*([-+*/x×])\s*(\d[\d,.]*)\s*=\s*\$?(\d[\d,.]*)")
RESULT = re.compile(r"=\s*\$?(" + NUMBER.pattern + ")")
FINAL_MARKER = re.compile(r"####|answer is|answer:|\\boxed", re.IGNORECASE)
HEDGE = re.compile(r"\?|not sure|assum|however|\bbut\b|unclear|cannot be determined", re.IGNORECASE)
SAFE_CONSTANTS = frozenset({1.0, 2.0, 10.0, 12.0, 24.0, 60.0, 100.0, 7.0})  # units a solution may bring in

NAMES = (
    "query_words_log",
    "answer_words_log",
    "answer_lines",
    "final_marker",
    "arithmetic_bad_any",
    "arithmetic_bad_log",
    "arithmetic_ok_log",
    "query_numbers",
    "answer_numbers",
    "hedges",
    "query_percent",
    "query_fraction",
    "last_result_is_final",
    "result_integer_share",
    "unexplained_number_share",
    "final_has_words",
    "query_number_coverage",
    "final_is_integer",
    "final_negative",
    "final_in_query",
    "final_magnitude",
    "no_final_number",
    "equals_signs",
    "distinct_query_numbers",
    "query_numbers_unused",
    *(f"query_topic_{i}" for i in range(1, AXES + 1)),
)


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", "").rstrip("."))
    except ValueError:
        return None


def final_number(text: str) -> float | None:
    """The answer's final number: after a `####` marker when there is one, else the last one."""
    marker = text.rfind("####")
    tail = text[marker + 4 :] if marker >= 0 else text
    found = NUMBER.findall(tail)
    return _number(found[-1]) if found else None


def _close(value: float, stated: str) -> bool:
    """Does `stated` equal `value` rounded to as many decimals as `stated` shows?"""
    text = stated.replace(",", "").rstrip(".")
    decimals = len(text.split(".", 1)[1]) if "." in text else 0
    number = _number(text)
    return number is not None and abs(value - number) <= 0.5 * 10**-decimals + 1e-9


def arithmetic_checks(answer: str) -> tuple[int, int]:
    """(right, wrong) among the answer's checkable calculations."""
    right = wrong = 0
    for m in EQUATION.finditer(ANNOTATION.sub(" ", answer)):  # annotations are checked below, once
        a, b = _number(m.group(1)), _number(m.group(3))
        if a is None or b is None or _number(m.group(4)) is None or (m.group(2) == "/" and b == 0):
            continue
        value = {"+": a + b, "-": a - b, "*": a * b, "x": a * b, "×": a * b, "/": a / b if b else 0.0}[m.group(2)]
        ok = _close(value, m.group(4))
        right, wrong = right + ok, wrong + (not ok)
    for m in ANNOTATION.finditer(answer):
        evaluated = _safe_eval(m.group(1))
        if evaluated is not None and _number(m.group(2)) is not None:
            ok = _close(evaluated, m.group(2))
            right, wrong = right + ok, wrong + (not ok)
    return right, wrong


def _safe_eval(expr: str) -> float | None:
    """Evaluate +-*/() over numbers only; anything else is not checkable."""
    if not re.fullmatch(r"[\d\s.+\-*/()]+", expr) or "**" in expr:
        return None
    try:
        value = eval(expr, {"__builtins__": {}}, {})
    except (SyntaxError, ZeroDivisionError, TypeError, ValueError, OverflowError):
        return None
    return float(value) if isinstance(value, int | float) else None


def features(item: Scored) -> list[float]:
    q, a = item.query, item.answer
    right, wrong = arithmetic_checks(a)
    q_numbers = [x for x in (_number(n) for n in NUMBER.findall(q)) if x is not None]
    a_numbers = {x for x in (_number(n) for n in NUMBER.findall(a)) if x is not None}
    results = [x for x in (_number(n) for n in RESULT.findall(a)) if x is not None]
    final = final_number(a)
    distinct_q = set(q_numbers)
    coverage = sum(1 for x in distinct_q if x in a_numbers) / max(1, len(distinct_q))
    known = distinct_q | set(results) | SAFE_CONSTANTS
    unexplained = sum(1 for x in a_numbers if x not in known) / max(1, len(a_numbers))
    marker = a.rfind("####")
    tail = a[marker + 4 :] if marker >= 0 else ""
    return [
        math.log1p(len(q.split())),
        math.log1p(len(a.split())),
        (a.count("\n") + 1) / 10,
        float(bool(FINAL_MARKER.search(a))),
        float(wrong > 0),
        math.log1p(wrong),
        math.log1p(right),
        len(q_numbers) / 10,
        len(a_numbers) / 20,
        float(bool(HEDGE.search(a))),
        float(bool(re.search(r"%|percent", q))),
        float(bool(re.search(r"fraction|/", q))),
        float(bool(results) and final is not None and abs(results[-1] - final) < 1e-6),
        sum(abs(x - round(x)) < 1e-9 for x in results) / max(1, len(results)),
        unexplained,
        float(len(tail.split()) > 1),
        coverage,
        float(final is not None and abs(final - round(final)) < 1e-9),
        float(final is not None and final < 0),
        float(final is not None and final in distinct_q),
        math.log10(abs(final) + 1) if final is not None else 0.0,
        float(final is None),
        a.count("=") / 10,
        len(distinct_q) / 10,
        float(coverage < 1),
        *basis().coordinates(item.query_vector),
    ]
