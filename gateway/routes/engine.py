"""`GET /admin/engine`: each local model's engine — state, restarts, measured throughput and
price, KV-cache capacity, speculation and its acceptance, outstanding tokens, carbon so far —
and each bundled embedding model's measured throughput and price."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from gateway.providers.local import LocalProvider
from gateway.providers.local_embeddings import LocalEmbeddingProvider
from gateway.routes.admin import require_admin
from gateway.service import gateway_of

router = APIRouter(prefix="/admin", dependencies=[Depends(require_admin)])


@router.get("/engine")
async def engine_status(request: Request) -> dict:
    deployments = gateway_of(request).deployments
    data = []
    for name, dep in deployments.items():
        if isinstance(dep.provider, LocalProvider):
            data.append(
                {"name": name, **dep.provider.replica.status(), "carbon_g_co2e": round(dep.provider.carbon_g_total, 9)}
            )
        elif isinstance(dep.provider, LocalEmbeddingProvider):  # the bundled embedder, in-process
            data.append({"name": name, "model": dep.config.upstream_model, **dep.provider.embedder.status()})
    return {"data": data}
