"""Anthropic's Models API pages (gateway/apis/anthropic/models.py)."""

from __future__ import annotations

import pytest

from gateway.apis.anthropic.models import model_page
from gateway.core.errors import InvalidRequest

NAMES = ["a", "b", "c", "d", "e"]


def ids(page: dict) -> list[str]:
    return [m["id"] for m in page["data"]]


def test_pages_walk_forward_and_back() -> None:
    first = model_page(NAMES, {"limit": "2"})
    assert ids(first) == ["a", "b"] and first["has_more"] and (first["first_id"], first["last_id"]) == ("a", "b")
    last = model_page(NAMES, {"limit": "2", "after_id": "c"})
    assert ids(last) == ["d", "e"] and not last["has_more"]
    back = model_page(NAMES, {"limit": "2", "before_id": "e"})
    assert ids(back) == ["c", "d"] and back["has_more"]
    assert ids(model_page(NAMES, {"limit": "2", "before_id": "b"})) == ["a"]
    assert ids(model_page(NAMES, {})) == NAMES  # default limit 20
    empty = model_page(NAMES, {"after_id": "e"})
    assert empty == {"data": [], "first_id": None, "last_id": None, "has_more": False}
    assert model_page(NAMES, {"after_id": "unknown"})["data"] == []


@pytest.mark.parametrize(
    "query", [{"limit": "0"}, {"limit": "1001"}, {"limit": "ten"}, {"after_id": "a", "before_id": "c"}]
)
def test_bad_paging_is_a_400(query: dict) -> None:
    with pytest.raises(InvalidRequest):
        model_page(NAMES, query)
