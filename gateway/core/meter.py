"""`Meter`: what one request's upstream calls cost, its part of the request's state
(gateway/core/context.py `RequestContext.meter`). Only its methods write it: a call that answered
(`call_answered`), its bill (`add_call`), the fail-closed charge of calls that were never metered
(`charge_unmetered`) and what a cache hit saved (`saved_by_cache`); everything else reads it (the
budget's settle, the ledger row, the headers, metrics).

Invariant: `cost` is only ever the sum of real upstream calls made for this request (every
cascade tier asked, a judge's grading calls) and, fail-closed, the hold of calls that answered
but were never metered; a cache hit leaves it at zero and records the avoided cost in `saved`.
In the batch lane each call the bundled engine answers is charged at the lane's factor of its
price, and the rest is recorded in `saved` too: idle capacity is the operator's to give away. An
external API's call is charged what its provider bills (its batch or flex tier's price when it
ran at one, `tier`); what the provider's own discounts saved is kept apart
(`provider_cache_saved`, `provider_tier_saved`), never in `saved`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

from policies.pricing import ZERO, Bill, Tier, Usage, in_picos


@dataclass(slots=True)
class Meter:
    usage: Usage = field(default_factory=Usage)
    cost: Decimal = ZERO
    by_model: dict[str, Decimal] = field(default_factory=dict)  # `cost` by the deployment each call went to
    saved: Decimal = ZERO  # what the gateway itself avoided: its caches, cheaper cascade tiers, the local lane
    provider_cache_saved: Decimal = ZERO  # what the providers' prompt caches saved (negative while writes cost more)
    provider_tier_saved: Decimal = ZERO  # what the providers' batch and flex tiers saved against list price
    tier: Tier = Tier.STANDARD  # the service tier the provider billed the answering call at
    # Upstream calls that answered (the provider bills them) and are not charged yet: settling
    # charges them the request's hold (stages/budget.py), so a failure to count, price or relay
    # an answer never charges $0.
    unmetered_calls: int = 0

    def call_answered(self) -> None:
        """An upstream call answered (or opened its stream): it is billed, whatever happens next,
        and counts as unmetered until `add_call` records its cost."""
        self.unmetered_calls += 1

    def add_call(
        self, model: str, usage: Usage, billed: Bill, lane_factor: Decimal = Decimal(1), tier: Tier | None = None
    ) -> None:
        """Record one upstream call to deployment `model`: its usage and bill (a request may make
        several, to several deployments: a cascade's tiers, a judge), and the tier it was billed at."""
        self.usage = self.usage + usage
        if self.unmetered_calls:
            self.unmetered_calls -= 1
        charged = in_picos(billed.cost * lane_factor)
        self.cost += charged
        self.by_model[model] = self.by_model.get(model, ZERO) + charged
        self.saved += in_picos(billed.cost) - charged  # the lane's discount
        self.provider_cache_saved += in_picos(billed.cache_saved)
        self.provider_tier_saved += in_picos(billed.tier_saved)
        if tier is not None:
            self.tier = tier

    def charge_unmetered(self, worst: Decimal) -> bool:
        """Fail closed: charge calls that answered but were never metered `worst` (the request's
        hold), the most the provider can have billed them. False: there were none."""
        if not self.unmetered_calls:
            return False
        self.cost = max(self.cost, in_picos(worst))
        self.unmetered_calls = 0
        return True

    def saved_by_cache(self, amount: Decimal) -> None:
        """A cache answered: what the upstream call it replaced would have cost."""
        self.saved = amount
