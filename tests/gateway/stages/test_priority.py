"""The priority stage: `x-costgate-priority`, capped by the key's plan, else the plan's default
(the table itself is engine/admission.py's, tested in tests/engine/test_admission.py)."""

from __future__ import annotations

import dataclasses

import pytest

from engine.admission import Priority
from gateway.core.errors import InvalidRequest
from gateway.stages.priority import HEADER, Prioritize
from tests.gateway.fakes import TEAM_A, request


@pytest.mark.parametrize(
    "plan, asked, runs_as",
    [
        ("pro", None, Priority.INTERACTIVE),
        ("pro", "realtime", Priority.REALTIME),
        ("pro", "BATCH", Priority.BATCH),
        ("free", None, Priority.BATCH),  # free keys fill idle capacity unless they ask
        ("free", "interactive", Priority.INTERACTIVE),
        ("free", "realtime", Priority.INTERACTIVE),  # capped by the plan, not refused
        ("enterprise", "realtime", Priority.REALTIME),
        ("pro", "  ", Priority.INTERACTIVE),
    ],
)
async def test_the_class_is_the_header_capped_by_the_plan(plan: str, asked: str | None, runs_as: Priority) -> None:
    ctx = request(
        headers={HEADER: asked} if asked is not None else {}, principal=dataclasses.replace(TEAM_A, plan=plan)
    )
    assert await Prioritize()(ctx) is None
    assert ctx.decided.priority is runs_as


async def test_without_a_principal_the_pro_default_applies() -> None:
    ctx = request(headers={HEADER: "batch"})
    await Prioritize()(ctx)
    assert ctx.decided.priority is Priority.BATCH


async def test_an_unknown_class_is_400_naming_the_header() -> None:
    ctx = request(headers={HEADER: "urgent"}, principal=TEAM_A)
    with pytest.raises(InvalidRequest) as refused:
        await Prioritize()(ctx)
    assert (refused.value.status, refused.value.param) == (400, HEADER)
    assert "urgent" in refused.value.message
    assert ctx.decided.priority is Priority.INTERACTIVE  # untouched
