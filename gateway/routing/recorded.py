"""A cascade's recorded traffic as what-if rows (policies/whatif.py): the samples it stored with
their text (`log_prompts: true`), each the query, every tier's answer and the weight it stands
for, priced at the cascade's own tiers for the answers' tokens. No provider is called: the last
tier's answer is in every sample (an escalation, or a shadow sample's)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from decimal import Decimal

from gateway.core.tokens import count_prompt, count_text
from gateway.routing.cascade import CascadeTarget, policy_of
from policies.agreement import answers_agree
from policies.pricing import Usage, cost_of
from policies.scorers import Scored
from policies.whatif import Recorded, estimate, report

MAX_ROWS = 2000  # the most recent samples a what-if reads
MAX_DRAWS = 50


def recorded(cascade: CascadeTarget, texts: dict) -> Recorded | None:
    """One stored sample's text as a row (None: not a two-tier sample with a query and answers)."""
    answers = texts.get("answers") or []
    query = texts.get("query")
    if not isinstance(query, str) or len(answers) != 2 or not all(isinstance(a, str) for a in answers):
        return None
    cheap, last = answers
    prompt = count_prompt({"model": "x", "messages": [{"role": "user", "content": query}]})
    first, final = cascade.tiers[0], cascade.tiers[-1]
    return Recorded(
        Scored(query, cheap),
        answers_agree(cheap, last),
        cost_of(Usage(prompt, count_text(cheap)), first.price),
        cost_of(Usage(prompt, count_text(last)), final.price),
    )


async def whatif(cascade: CascadeTarget, target: float | None, router: bool, draws: int) -> dict:
    """The what-if report on the cascade's recorded traffic, or why there is none."""
    stored = await cascade.services.store.texted(cascade.name, MAX_ROWS)
    pairs = [(row, w) for texts, w in stored if (row := recorded(cascade, texts)) is not None]
    if not pairs:
        return {
            "cascade": cascade.name,
            "report": None,
            "why": "no samples with their text: set log_prompts: true (samples keep their text) and let traffic come",
        }
    policy = policy_of(cascade.config)
    if target is not None:
        policy = replace(policy, target=target)
    rows, weights = [r for r, _ in pairs], [w for _, w in pairs]
    found = await asyncio.to_thread(estimate, rows, policy, min(draws, MAX_DRAWS), 0.9, router, 0, weights)
    return {
        "cascade": cascade.name,
        "quality_target": policy.target,
        "router": router,
        "samples": len(rows),
        "report": report(found),
        "last_tier_usd_per_request": str((sum((r.last_cost for r in rows), Decimal(0)) / len(rows)).normalize()),
    }
