"""How a cascade rates a tier's answer: the answer as scorers read it (`scored_answer`), and the
`Confidence` a cascade asks — a pure scorer of policies/scorers wrapped as `PureConfidence`, or
one that makes a charged call of its own (the judge, gateway/routing/judge.py)."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Protocol

from gateway.bodies import answer_text, first_choice, query_text, token_logprobs
from gateway.context import RequestContext
from policies.scorers import Scored, Scorer
from policies.scorers.calibration import Calibration


class Confidence(Protocol):
    """How the cascade rates a tier's answer: a pure scorer (policies/scorers), or one that makes
    a charged call of its own (the judge)."""

    @property
    def needs_logprobs(self) -> bool: ...

    @property
    def calibration(self) -> Calibration | None:
        """What its thresholds did on labelled data (the learned scorer's file), if known."""
        ...

    async def score(self, ctx: RequestContext, item: Scored) -> float: ...

    def worst_case_cost(self, ctx: RequestContext) -> Decimal: ...


@dataclass(frozen=True, slots=True)
class PureConfidence:
    """A pure scorer as a `Confidence`: no call, no cost."""

    scorer: Scorer

    @property
    def needs_logprobs(self) -> bool:
        return self.scorer.needs_logprobs

    @property
    def calibration(self) -> Calibration | None:
        return self.scorer.calibration

    async def score(self, ctx: RequestContext, item: Scored) -> float:
        return self.scorer.score(item)

    def worst_case_cost(self, ctx: RequestContext) -> Decimal:
        return Decimal(0)


def scored_answer(request: dict[str, Any], answer: dict[str, Any]) -> Scored:
    """One tier's answer as scorers read it."""
    choice = first_choice(answer)
    message = choice.get("message") if isinstance(choice.get("message"), dict) else None
    fmt = request.get("response_format")
    return Scored(
        query=query_text(request),
        answer=answer_text(answer),
        finish_reason=choice.get("finish_reason"),
        logprobs=token_logprobs(choice.get("logprobs")),
        wants_json=isinstance(fmt, dict) and fmt.get("type") in ("json_object", "json_schema"),
        has_tool_calls=bool(message.get("tool_calls")) if message else False,
    )
