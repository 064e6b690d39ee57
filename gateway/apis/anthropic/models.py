"""Anthropic's Models API (`GET /v1/models`, `GET /v1/models/{model_id}`) in its own shape, for
the clients that send `anthropic-version` (the Anthropic SDKs' `client.models.list()` and
`retrieve()`): a page of ModelInfo objects with `first_id`, `last_id` and `has_more`, paged
by `limit` (1-1000, default 20), `after_id` and `before_id` as at Anthropic. costgate knows no
release date for a configured name, so `created_at` is the epoch, which Anthropic's reference
allows for an unknown date."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gateway.core.errors import InvalidRequest

UNKNOWN_RELEASE = "1970-01-01T00:00:00Z"
DEFAULT_LIMIT, MAX_LIMIT = 20, 1000


def model_info(name: str) -> dict[str, Any]:
    return {"type": "model", "id": name, "display_name": name, "created_at": UNKNOWN_RELEASE, "lifecycle": "active"}


def model_page(names: Sequence[str], query: Mapping[str, str]) -> dict[str, Any]:
    """One page of `names` (in the gateway's order) as Anthropic lists models."""
    raw = query.get("limit", str(DEFAULT_LIMIT))
    try:
        limit = int(raw)
    except ValueError:
        limit = 0
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidRequest(f"limit: must be an integer from 1 to {MAX_LIMIT}, not {raw!r}", param="limit")
    after, before = query.get("after_id"), query.get("before_id")
    if after is not None and before is not None:
        raise InvalidRequest("after_id and before_id cannot be given together", param="before_id")
    names = list(names)
    if before is not None:
        end = names.index(before) if before in names else 0
        page = names[max(0, end - limit) : end]
        more = end - limit > 0
    else:
        if after is None:
            start = 0
        else:  # an id not listed: past the end
            start = names.index(after) + 1 if after in names else len(names)
        page = names[start : start + limit]
        more = start + limit < len(names)
    return {
        "data": [model_info(n) for n in page],
        "first_id": page[0] if page else None,
        "last_id": page[-1] if page else None,
        "has_more": more,
    }
