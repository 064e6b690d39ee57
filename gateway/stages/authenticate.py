"""Stage: bearer key -> principal; the requested model must exist and be allowed for the key."""

from __future__ import annotations

from collections.abc import Container

from starlette.responses import Response

from gateway.core.context import RequestContext
from gateway.core.errors import NotFound, PermissionDenied
from gateway.storage.keys import KeyStore


class Authenticate:
    def __init__(self, keys: KeyStore, models: Container[str]) -> None:
        self.keys = keys
        self.models = models

    async def __call__(self, ctx: RequestContext) -> Response | None:
        if ctx.principal is None:  # a batch line arrives resolved from its batch's key (checked live)
            ctx.principal = await self.keys.authenticate(ctx.api_key)
        model = ctx.body["model"]
        ctx.requested_model = model
        if model not in self.models:
            raise NotFound(f"the model {model!r} does not exist", code="model_not_found", param="model")
        if not ctx.principal.may_use(model):
            raise PermissionDenied(f"this key may not use the model {model!r}", param="model")
        return None
