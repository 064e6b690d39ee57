"""The route stage: the target registered under the requested model name answers, whatever the
body says by then (compression may have rewritten it), and its refusals pass through."""

from __future__ import annotations

from decimal import Decimal

import pytest
from starlette.responses import Response

from gateway.core.context import RequestContext
from gateway.core.errors import CircuitOpen
from gateway.stages.route import Route
from tests.gateway.fakes import TEAM_A, request


class FakeTarget:
    def __init__(self, name: str, fail: Exception | None = None) -> None:
        self.name, self.fail = name, fail
        self.asked: list[RequestContext] = []

    async def answer(self, ctx: RequestContext) -> Response:
        self.asked.append(ctx)
        if self.fail is not None:
            raise self.fail
        return Response(self.name.encode())

    def worst_case_cost(self, ctx: RequestContext) -> Decimal:
        return Decimal("0.01")


async def test_the_target_named_by_the_requested_model_answers() -> None:
    small, auto = FakeTarget("small"), FakeTarget("auto")
    ctx = request({"model": "small", "messages": []}, principal=TEAM_A, requested_model="auto")
    response = await Route({"small": small, "auto": auto})(ctx)
    assert response is not None and response.body == b"auto"
    assert auto.asked == [ctx] and small.asked == []


async def test_the_targets_refusal_reaches_the_pipeline() -> None:
    broken = FakeTarget("broken", fail=CircuitOpen("open", retry_after=3))
    ctx = request(principal=TEAM_A, requested_model="broken")
    with pytest.raises(CircuitOpen):
        await Route({"broken": broken})(ctx)
    assert broken.asked == [ctx]
