"""Stored responses: the conversation a chain makes, and who may see it."""

from __future__ import annotations

import pytest

from gateway.apis.responses import response_chain as store
from gateway.apis.responses.response_chain import StoredResponse, conversation, resolve_chain, visible
from gateway.apis.responses.responses_request import parse_request
from gateway.core.errors import InvalidRequest, NotFound


def stored(response_id: str, previous: str | None, text: str, team: str = "t1") -> StoredResponse:
    req = parse_request({"model": "small", "input": text, "previous_response_id": previous})
    output = [
        {
            "id": f"msg_{response_id}",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": f"re: {text}", "annotations": []}],
        }
    ]
    return StoredResponse.of(req, {"id": response_id, "object": "response", "output": output}, team)


def getter(*responses: StoredResponse):
    by_id = {r.id: r for r in responses}

    async def get(response_id: str) -> StoredResponse | None:
        return by_id.get(response_id)

    return get


def texts(items: list[dict]) -> list[str]:
    return [part["text"] for item in items for part in item["content"]]


async def test_chain_is_walked_back_and_returned_oldest_first() -> None:
    chain = await resolve_chain(
        getter(stored("r1", None, "a"), stored("r2", "r1", "b"), stored("r3", "r2", "c")), "r3", "t1"
    )
    assert [s.id for s in chain] == ["r1", "r2", "r3"]
    assert texts(conversation(chain)) == ["a", "re: a", "b", "re: b", "c", "re: c"]


@pytest.mark.parametrize(
    "responses, start, missing",
    [
        ((), "r9", "r9"),
        ((stored("r1", None, "a", team="t2"),), "r1", "r1"),  # another team's: it does not exist
        ((stored("r2", "r1", "b"),), "r2", "r1"),  # an earlier link was deleted
    ],
)
async def test_missing_or_foreign_links_are_404(
    responses: tuple[StoredResponse, ...], start: str, missing: str
) -> None:
    with pytest.raises(NotFound) as err:
        await resolve_chain(getter(*responses), start, "t1")
    assert err.value.param == "previous_response_id" and f"'{missing}'" in err.value.message


async def test_runaway_chain_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store, "MAX_CHAIN", 2)
    responses = [stored("r1", None, "a"), stored("r2", "r1", "b"), stored("r3", "r2", "c")]
    with pytest.raises(InvalidRequest):
        await resolve_chain(getter(*responses), "r3", "t1")


def test_stored_value_keeps_this_requests_input_only() -> None:
    s = stored("r2", "r1", "second")
    assert (s.previous_response_id, s.team_id, texts(list(s.input_items))) == ("r1", "t1", ["second"])
    assert s.output_items == tuple(s.response["output"])


def test_visible_only_to_its_team() -> None:
    s = stored("r1", None, "a")
    assert visible(s, "t1", "r1") is s
    for candidate, team in ((s, "t2"), (None, "t1")):
        with pytest.raises(NotFound):
            visible(candidate, team, "r1")
