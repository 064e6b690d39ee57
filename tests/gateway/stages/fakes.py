"""What the stage tests share: a request context as a route builds it, and the callers."""

from __future__ import annotations

from typing import Any

from starlette.datastructures import Headers

from gateway.context import Endpoint, Principal, RequestContext

TEAM_A = Principal(team_id="team_a1", team_name="team-a", key_id="key_a1")


def request(body: dict[str, Any] | None = None, *, headers: dict[str, str] | None = None,
            endpoint: Endpoint = Endpoint.CHAT, principal: Principal | None = None, stream: bool = False,
            api_key: str | None = "sk-cg-secret", **fields: Any) -> RequestContext:
    """A context as the route hands it to the pipeline (headers case-insensitive, like Starlette's),
    with `fields` already filled in as the earlier stages would have."""
    body = {"model": "small", "messages": [{"role": "user", "content": "hi"}]} if body is None else body
    ctx = RequestContext(request_id="req_test", endpoint=endpoint, body=body, api_key=api_key,
                         headers=Headers(headers or {}), stream=stream, principal=principal)
    for name, value in fields.items():
        setattr(ctx, name, value)
    return ctx
