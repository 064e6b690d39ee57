"""Admin API of the routing policies: cascades (threshold, agreement estimate) and breakers."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from gateway.routes.admin import require_admin

router = APIRouter(prefix="/admin", dependencies=[Depends(require_admin)])


@router.get("/cascades")
async def list_cascades(request: Request) -> dict:
    routing = request.app.state.gateway.routing
    data = []
    for name, cascade in routing.cascades.items():
        e = cascade.controller.estimate()
        c = cascade.config
        data.append(
            {
                "name": name,
                "tiers": c.tiers,
                "scorer": c.scorer,
                "quality_target": c.quality_target,
                "shadow_rate": c.shadow_rate,
                "adaptive": c.adaptive,
                "min_samples": c.min_samples,
                "confidence": c.confidence,
                "threshold": e.threshold,
                "escalate_all": e.threshold is None,
                "thresholds_in_use": [cascade.threshold(i) for i in range(len(c.tiers) - 1)],
                "adapted": e.adapted,
                "samples": e.samples,
                "agreement": e.agreement,
                "agreement_lower_bound": e.lower_bound,
                "meets_target": e.meets_target,  # the quality bound (policies/quality.py), not the agreement
            }
        )
    return {"data": data}


@router.get("/breakers")
async def list_breakers(request: Request) -> dict:
    views = request.app.state.gateway.breakers.views()
    return {
        "data": [
            {
                "deployment": name,
                "state": v.state.value,
                "outcomes": v.outcomes,
                "errors": v.errors,
                "retry_after_s": v.retry_after_s,
            }
            for name, v in views.items()
        ]
    }
