"""The judge scorer: a cheap model grades the answer (a real call, charged to the request).

Unlike the pure scorers of policies/scorers, it calls a model, so it lives with the calls; the
cascade treats every scorer through one `Confidence` interface (gateway/routing/confidence.py)."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from gateway.core.bodies import answer_text
from gateway.core.context import Endpoint, RequestContext
from gateway.routing.guarded_call import Upstream
from gateway.upstream.deployments import Deployment
from gateway.upstream.worst_case import worst_case
from policies.scorers import Scored

GRADE = re.compile(r"\b(10|\d)(?:\.\d+)?\b")
JUDGE_MAX_TOKENS = 4
INSTRUCTIONS = (
    "You grade answers. Given a question and an answer, reply with one integer from 0 to 10: "
    "how likely the answer is correct and complete (10 = certainly). Reply with the number only."
)


def parse_grade(text: str) -> float | None:
    """'8' -> 0.8; the first integer 0-10 in the reply, None when there is none."""
    m = GRADE.search(text)
    return None if m is None else int(m.group(1)) / 10


def judge_body(dep: Deployment, item: Scored) -> dict[str, Any]:
    return {
        "model": dep.config.upstream_model,
        "max_tokens": JUDGE_MAX_TOKENS,
        "temperature": 0,
        "messages": [
            {"role": "system", "content": INSTRUCTIONS},
            {"role": "user", "content": f"Question:\n{item.query}\n\nAnswer:\n{item.answer}"},
        ],
    }


class JudgeScorer:
    needs_logprobs = False
    calibration = None  # no labelled data: the cascade learns from its traffic

    def __init__(self, dep: Deployment, upstream: Upstream) -> None:
        self.dep = dep
        self.upstream = upstream  # the guarded call: the judge's breaker, the request's priority

    async def score(self, ctx: RequestContext, item: Scored) -> float:
        completion = await self.upstream.complete(ctx, self.dep, judge_body(self.dep, item), Endpoint.CHAT)
        grade = parse_grade(answer_text(completion.body))
        return 0.0 if grade is None else grade  # an unreadable grade escalates

    def worst_case_cost(self, ctx: RequestContext) -> Decimal:
        # The judge reads the question and the answer: bounded by the request's prompt plus a
        # full-length answer, and writes a few tokens.
        return worst_case(ctx, self.dep) * 2
