"""The keep-text stage (distillation, issue 13 item 6): which cascade answers it keeps, and what
it keeps of them. The text store is faked at its edge (`keep`); the context is the one the
pipeline hands the stage once the request was answered."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.core.context import CacheStatus, Endpoint, RequestContext
from gateway.stages.keep_text import KeepText, kept_answer
from gateway.storage.distill_texts import KeptText
from tests.gateway.fakes import TEAM_A, request

QUESTION = [{"role": "user", "content": "why is the sky blue?"}]
LAST_TIERS = {"auto": "large"}  # the cascade `auto` ends in `large`


class FakeStore:
    """The text store at its edge: what the stage asked it to keep."""

    def __init__(self) -> None:
        self.kept: list[KeptText] = []

    def keep(self, row: KeptText) -> None:
        self.kept.append(row)


def answer(content: Any = "Rayleigh scattering.", finish_reason: str = "stop", **message: Any) -> dict[str, Any]:
    return {
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, **message},
                "finish_reason": finish_reason,
            }
        ]
    }


def answered(body: dict[str, Any] | None = None, **fields: Any) -> RequestContext:
    """A chat request to the cascade, answered by its last tier for team-a, as Record leaves it."""
    fields = {
        "principal": TEAM_A,
        "requested_model": "auto",
        "served_model": "large",
        "response_body": answer(),
        **fields,
    }
    return request({"model": "auto", "messages": QUESTION, **(body or {})}, **fields)


async def kept(ctx: RequestContext, teams: tuple[str, ...] = ("team-a",), shadow: bool = False) -> list[KeptText]:
    store = FakeStore()
    stage = KeepText(store, LAST_TIERS, teams)  # type: ignore[arg-type]
    if shadow:  # the side pipeline's
        stage = stage.for_shadows()
    assert await stage(ctx) is None  # it never answers the request itself
    await stage.settle(ctx)
    return store.kept


async def test_an_escalation_of_an_opted_in_team_is_kept_whole() -> None:
    ctx = answered()
    assert await kept(ctx) == [
        KeptText("auto", "escalation", "req_test", "team_a1", "team-a", "large", QUESTION, "Rayleigh scattering.")
    ]


@pytest.mark.parametrize("teams", [("team-a",), ("team_a1",)])  # a team opts in by name or by id
async def test_a_shadow_sample_is_kept_as_one(teams: tuple[str, ...]) -> None:
    (row,) = await kept(answered(), teams, shadow=True)
    assert (row.source, row.answer) == ("shadow", "Rayleigh scattering.")


async def test_a_streamed_answer_is_kept_from_its_deltas() -> None:
    (row,) = await kept(answered(stream=True, response_body=None, completion_text=["Rayleigh ", "scattering."]))
    assert row.answer == "Rayleigh scattering."


@pytest.mark.parametrize(
    "teams, body, fields",
    [
        (("team-b",), None, {}),  # the team did not opt in
        (("team-a",), None, {"principal": None}),
        (("team-a",), None, {"requested_model": "small"}),  # not a cascade
        (("team-a",), None, {"served_model": "small"}),  # a cheaper tier answered: nothing to learn
        (("team-a",), None, {"error": "upstream_timeout"}),
        (("team-a",), None, {"status_code": 502}),
        (("team-a",), None, {"cache_status": CacheStatus.EXACT}),  # not the upstream's answer
        (("team-a",), None, {"endpoint": Endpoint.COMPLETIONS}),
        (("team-a",), {"n": 2}, {}),
        (("team-a",), None, {"response_body": answer(finish_reason="length")}),  # cut at max_tokens
        (("team-a",), None, {"response_body": answer(None, tool_calls=[{"id": "c1"}])}),
        (("team-a",), None, {"response_body": answer("   ")}),
        (("team-a",), None, {"response_body": None}),  # nothing was read
        (("team-a",), None, {"stream": True, "response_body": None, "completion_text": [" "]}),
    ],
)
async def test_what_is_not_an_escalation_to_learn_from_is_not_kept(
    teams: tuple[str, ...], body: dict[str, Any] | None, fields: dict[str, Any]
) -> None:
    assert await kept(answered(body, **fields), teams) == []


def test_the_kept_answer_is_the_first_choices_text() -> None:
    ctx = answered(response_body={"choices": [answer("one")["choices"][0], answer("two")["choices"][0]]})
    assert kept_answer(ctx) == "one"
