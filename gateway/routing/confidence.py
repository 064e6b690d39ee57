"""How a cascade rates a tier's answer: the answer as scorers read it (`scored_answer`, with the
query's vector: `QueryVector`), the `Confidence` a cascade asks — a pure scorer of
policies/scorers wrapped as `PureConfidence`, or one that makes a charged call of its own (the
judge, gateway/routing/judge.py) — and the rated answer (`TierAnswer`)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any, Protocol

import numpy as np

from gateway.core.bodies import answer_text, first_choice, query_text, token_logprobs
from gateway.core.context import RequestContext
from gateway.upstream.deployments import Deployment
from policies.pricing import Usage
from policies.scorers import Scored, Scorer
from policies.threshold_calibration import Calibration

log = logging.getLogger("costgate.cascade")
Embed = Callable[[list[str]], Awaitable[np.ndarray]]  # texts -> MiniLM's unit rows (gateway/caching/minilm.py)


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


@dataclass(slots=True)
class TierAnswer:
    """One tier's answer to a cascade's request, rated."""

    tier: int
    dep: Deployment
    body: dict[str, Any]  # as the client would see it (logprobs it did not ask for removed)
    raw: bytes
    item: Scored
    confidence: float
    usage: Usage = field(default_factory=Usage)  # of this tier's own call


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


class QueryVector:
    """The query's MiniLM vector, which the learned scorer reads for what the question is about
    (policies/scorers/topic.py). Started before the first tier is asked, so the pass runs on the
    model's worker thread while that tier answers: one pass a request, whatever the tiers."""

    def __init__(self, vector: asyncio.Future[np.ndarray | None] | None) -> None:
        self._vector = vector

    @classmethod
    def start(cls, embed: Embed | None, text: str) -> QueryVector:
        return cls(asyncio.ensure_future(_embedded(embed, text)) if embed is not None else None)

    @classmethod
    def known(cls, vector: np.ndarray | None) -> QueryVector:
        done: asyncio.Future[np.ndarray | None] = asyncio.get_running_loop().create_future()
        done.set_result(vector)
        return cls(done)

    async def on(self, item: Scored) -> Scored:
        """`item` with the vector (None where there is no model or its pass failed)."""
        return item if self._vector is None else replace(item, query_vector=await self._vector)

    def cancel(self) -> None:
        """No tier will be scored: a pass not yet run is not needed."""
        if self._vector is not None:
            self._vector.cancel()


async def _embedded(embed: Embed, text: str) -> np.ndarray | None:
    try:
        return (await embed([text]))[0]
    except Exception as err:  # a scorer without the topic still scores, from the answer alone
        log.warning("cascade: no vector for the query (%s); its topic is taken as the mean", err)
        return None
