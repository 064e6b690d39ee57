"""Rule checks: cheap certainties about a bad answer. They gate every other scorer."""

from __future__ import annotations

import re

import orjson

from policies.scorers import Scored

REFUSAL = re.compile(
    r"^\s*(?:i'?m sorry|i am sorry|sorry,|i apologi[sz]e|as an ai\b|i (?:can(?:no|')t|am (?:not able|unable)|"
    r"won'?t be able) (?:to )?(?:help|assist|answer|provide|comply|do that))",
    re.IGNORECASE,
)


def rule_violation(item: Scored) -> str | None:
    """The first rule the answer breaks (`empty`, `truncated`, `refusal`, `invalid_json`), or None."""
    if not item.answer.strip() and not item.has_tool_calls:
        return "empty"
    if item.finish_reason == "length":
        return "truncated"
    if REFUSAL.search(item.answer):
        return "refusal"
    if item.wants_json and not item.has_tool_calls:
        try:
            if not isinstance(orjson.loads(item.answer), dict):
                return "invalid_json"
        except orjson.JSONDecodeError:
            return "invalid_json"
    return None


class RuleScorer:
    """1.0 for an answer no rule rejects, 0.0 otherwise."""

    needs_logprobs = False
    calibration = None  # no labelled data: the cascade learns from its traffic

    def score(self, item: Scored) -> float:
        return 0.0 if rule_violation(item) else 1.0
