"""Admin API of the routing policies: cascades (threshold, quality estimate, scorer, savings, refits) and breakers."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query, Request

from gateway.core.errors import NotFound
from gateway.routes.admin import require_admin
from gateway.routing.cascade import CascadeTarget, tier_threshold
from gateway.routing.learning import Learning
from gateway.routing.recorded import MAX_DRAWS, whatif
from gateway.service import gateway_of
from policies.pricing import format_usd
from policies.scorers.refit import traffic_auc

router = APIRouter(prefix="/admin", dependencies=[Depends(require_admin)])


@router.get("/cascades")
async def list_cascades(request: Request) -> dict:
    routing = gateway_of(request).routing
    return {"data": [cascade_view(cascade, routing.learning.get(name)) for name, cascade in routing.cascades.items()]}


@router.get("/cascades/{name}/whatif")
async def cascade_whatif(
    request: Request,
    name: str,
    quality_target: float | None = Query(default=None, gt=0.0, le=1.0),
    router_on: bool = Query(default=True, alias="router"),
    draws: int = Query(default=10, ge=1, le=MAX_DRAWS),
) -> dict:
    """What the cascade would do, at `quality_target` (default: its own) and with or without the
    router, on its recorded traffic (the samples that kept their text): gateway/routing/recorded.py."""
    cascade = gateway_of(request).routing.cascades.get(name)
    if cascade is None:
        raise NotFound(f"no cascade named {name!r}")
    return await whatif(cascade, quality_target, router_on, draws)


def cascade_view(cascade: CascadeTarget, learning: Learning | None) -> dict:
    """One cascade's state: its settings, what its controller estimates (policies/quality_controller.py),
    how well its scorer ranks, what it did since start (`Tally`) and its refits."""
    state = cascade.state  # one value: the scorer, controller and router in use together
    controller, router = state.controller, state.router
    e = controller.estimate()
    c = cascade.config
    auc, auc_on = traffic_auc(controller.samples), "samples"
    if learning is not None and learning.refitted:
        auc_on = "samples, most of which the refitted scorer was fitted on (optimistic)"
    # the last refit's held-back rows (an upgrade's: the current scorer's stored confidences on them)
    if learning is not None and learning.last is not None:
        v = learning.last.verdict
        held_back = v.candidate_auc if v.replace else v.current_auc
        if held_back is not None:
            auc, auc_on = held_back, "held-back samples of the last refit"
    t = cascade.tally
    return {
        "name": cascade.name,
        "tiers": c.tiers,
        # in use: "learned (refit from traffic)" once a rules or logprob cascade upgraded
        "scorer": c.scorer if learning is None else learning.scorer_in_use,
        "scorer_configured": c.scorer,
        "quality_target": c.quality_target,
        "shadow_rate": c.shadow_rate,
        "adaptive": c.adaptive,
        "min_samples": c.min_samples,
        "confidence": c.confidence,
        "mode": e.mode.value,
        "reason": e.reason,
        "threshold": e.threshold,
        "escalate_all": e.threshold is None,
        "thresholds_in_use": [tier_threshold(c, controller, i) for i in range(len(c.tiers) - 1)],
        "adapted": e.adapted,
        "samples": e.samples,
        "agreement": e.agreement,
        "agreement_lower_bound": e.lower_bound,
        # the share of the last tier's quality kept at the threshold, and its one-sided bound
        "quality": e.quality,
        "quality_lower_bound": e.quality_lower_bound,
        "meets_target": e.meets_target,  # the quality bound (policies/quality.py), not the agreement
        "last_tier_quality": e.last_tier_quality,
        "last_tier_quality_source": e.last_tier_source,
        "calibration": e.calibration,
        "shadow_probability": e.shadow_rate,
        "estimated_escalation": e.escalation,  # at the threshold, from the samples and calibration
        "scorer_auc": auc,  # agreement with the last tier ranked by the scorer's confidence
        "scorer_auc_on": auc_on,
        # since start, on this replica (cascade.py `Tally`)
        "answered": t.answered,
        "escalated": t.escalated,
        "escalation_rate": t.escalation_rate,
        "charged_usd": format_usd(t.charged),
        "always_last_tier_usd": format_usd(t.always_last),
        "shadow_usd": format_usd(t.shadow),
        "saved_usd": format_usd(t.saved),
        # the router before the call (policies/precall.py): trained on the samples, or why not
        "router": {
            "enabled": c.router,
            "trained": router is not None,
            "auc": None if router is None else router.auc,  # out of fold, on its samples
            "samples": None if router is None else router.rows,
            "routed": cascade.routed,  # requests sent straight to the last tier since start
        },
        # the learning curve: cost against the last tier alone and the estimated quality, over the first requests
        "learning_curve": [
            {
                "requests": p.requests,
                "cost_ratio": p.cost_ratio,
                "escalation_rate": p.escalation_rate,
                "mode": p.mode,
                "threshold": p.threshold,
                "quality": p.quality,
                "quality_lower_bound": p.quality_lower_bound,
            }
            for p in t.curve
        ],
        "refit": learning.view() if learning is not None else {"enabled": False, "why": "not built"},
    }


@router.get("/breakers")
async def list_breakers(request: Request) -> dict:
    views = gateway_of(request).breakers.views()
    return {
        "data": [
            {
                "deployment": name,
                "state": v.state.value,
                "outcomes": v.outcomes,
                "errors": v.errors,
                "retry_after_s": v.retry_after_s,
                "teams_open": v.teams_open,  # teams cut off by their own failures, the others served
            }
            for name, v in views.items()
        ]
    }
