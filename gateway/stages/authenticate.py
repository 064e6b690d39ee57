"""Stage: bearer key -> principal; the requested model must exist and be allowed for the key."""

from __future__ import annotations

from collections.abc import Container

from starlette.responses import Response

from gateway.core.context import Principal, RequestContext
from gateway.core.errors import NotFound, PermissionDenied
from gateway.storage.keys import KeyStore


class Authenticate:
    def __init__(self, keys: KeyStore, models: Container[str]) -> None:
        self.keys = keys
        self.models = models

    async def __call__(self, ctx: RequestContext) -> Response | None:
        if ctx.principal is None:  # a batch line arrives resolved from its batch's key (checked live)
            ctx.principal = await self.keys.authenticate(ctx.api_key)
        check_model(ctx.principal, ctx.asked.model, self.models)
        return None


def check_model(principal: Principal, model: str, models: Container[str]) -> None:
    """The model must exist and the key may use it: the pipeline's check, and the token-count
    routes' (which call no upstream, yet answer no model a key may not see)."""
    if model not in models:
        raise NotFound(f"the model {model!r} does not exist", code="model_not_found", param="model")
    if not principal.may_use(model):
        raise PermissionDenied(f"this key may not use the model {model!r}", param="model")
