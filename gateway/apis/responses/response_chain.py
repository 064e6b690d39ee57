"""What a stored response keeps, and the conversation a chain of them makes.

A response created with `store` (the default) can be continued with `previous_response_id`
and read or deleted by id, by the team that created it only: to any other team it does not
exist (404, never 403, so ids reveal nothing). The store itself lives above this package; here
are the value it keeps and the pure rules over it.

Continuing a response sends, oldest first, every earlier response's input items and output
items, then the new input. Earlier `instructions` are not carried over (OpenAI's rule), which
is why they are not part of the stored items.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gateway.apis.responses.responses_request import ResponsesRequest
from gateway.apis.responses.responses_to_chat import input_items
from gateway.core.errors import InvalidRequest, NotFound

# Continuing a chain costs one store read per link; a runaway chain is refused, not walked.
MAX_CHAIN = 1000


@dataclass(frozen=True, slots=True)
class StoredResponse:
    id: str  # resp_...
    team_id: str  # the only team that may see, continue or delete it
    previous_response_id: str | None  # the link to walk back through
    input_items: tuple[dict[str, Any], ...]  # this request's input only, as items
    output_items: tuple[dict[str, Any], ...]  # the Response's `output`
    response: dict[str, Any]  # the Response object as served, for GET /v1/responses/{id}

    @classmethod
    def of(cls, req: ResponsesRequest, response: dict[str, Any], team_id: str) -> StoredResponse:
        return cls(
            id=response["id"],
            team_id=team_id,
            previous_response_id=req.previous_response_id,
            input_items=tuple(input_items(req)),
            output_items=tuple(response["output"]),
            response=response,
        )


def conversation(chain: Sequence[StoredResponse]) -> list[dict[str, Any]]:
    """The items a chain (oldest first) contributes before a new request's input."""
    items: list[dict[str, Any]] = []
    for stored in chain:
        items.extend(stored.input_items)
        items.extend(stored.output_items)
    return items


def visible(stored: StoredResponse | None, team_id: str, response_id: str) -> StoredResponse:
    """`stored` if this team may see it; otherwise it does not exist."""
    if stored is None or stored.team_id != team_id:
        raise NotFound(f"Response with id '{response_id}' not found.", code="response_not_found")
    return stored


async def resolve_chain(
    get: Callable[[str], Awaitable[StoredResponse | None]], response_id: str, team_id: str
) -> list[StoredResponse]:
    """The chain ending at `response_id`, oldest first; `get` reads one stored response."""
    chain: list[StoredResponse] = []
    next_id: str | None = response_id
    while next_id is not None:
        stored = await get(next_id)
        if stored is None or stored.team_id != team_id:
            raise NotFound(
                f"Previous response with id '{next_id}' not found.",
                param="previous_response_id",
                code="previous_response_not_found",
            )
        chain.append(stored)
        if len(chain) > MAX_CHAIN:
            raise InvalidRequest(
                f"the conversation before '{response_id}' is longer than {MAX_CHAIN} responses; start a new one",
                param="previous_response_id",
            )
        next_id = stored.previous_response_id
    chain.reverse()
    return chain


async def continued(
    get: Callable[[str], Awaitable[StoredResponse | None]], previous_response_id: str | None, team_id: str
) -> tuple[dict[str, Any], ...] | None:
    """The conversation a request continues (`previous_response_id`'s chain as items), or None
    when it continues none."""
    if previous_response_id is None:
        return None
    return tuple(conversation(await resolve_chain(get, previous_response_id, team_id)))


def deleted(response_id: str) -> dict[str, Any]:
    """The body of DELETE /v1/responses/{id}."""
    return {"id": response_id, "object": "response", "deleted": True}


def input_item_page(stored: StoredResponse, order: str, limit: int, after: str | None) -> dict[str, Any]:
    """`GET /v1/responses/{id}/input_items`: this response's input items as OpenAI lists them,
    newest first by default, `limit` a page, continuing after the item id `after`. Items that
    came without an id get a stable one made from the response's id and their position."""
    items = [_with_id(item, stored.id, i) for i, item in enumerate(stored.input_items)]
    if order == "desc":
        items.reverse()
    if after is not None:
        ids = [item["id"] for item in items]
        if after not in ids:
            raise InvalidRequest(f"no input item {after!r} in response '{stored.id}'", param="after")
        items = items[ids.index(after) + 1 :]
    page = items[:limit]
    return {
        "object": "list",
        "data": page,
        "first_id": page[0]["id"] if page else None,
        "last_id": page[-1]["id"] if page else None,
        "has_more": len(items) > limit,
    }


def _with_id(item: dict[str, Any], response_id: str, position: int) -> dict[str, Any]:
    """The item as OpenAI lists it: with an id, and a message's text as a list of parts."""
    message = item.get("type", "message") == "message"
    listed = {"id": f"{'msg' if message else 'item'}_{response_id.removeprefix('resp_')}_{position}", **item}
    if message:
        listed["type"] = "message"
        if isinstance(item.get("content"), str):
            part = "output_text" if item.get("role") == "assistant" else "input_text"
            listed["content"] = [{"type": part, "text": item["content"]}]
    return listed
