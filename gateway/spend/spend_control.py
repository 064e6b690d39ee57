"""`SpendControl`: budgets, plans, rate limits and alerts, built once per app.

It ties the pure policies (policies/budgets.py, ratelimit.py, plans.py, alerts.py) to the
counter store (in-process or Redis), the budget table and the ledger: which budgets apply to a
request, admitting it (seeding counters from the ledger when they do not exist), settling it,
raising alerts (gateway/spend/budget_alerts.py), and the admin view of every budget.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

import httpx
from prometheus_client import CollectorRegistry
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

from gateway.config.limits_config import TeamLimits
from gateway.config.settings import Settings
from gateway.core.context import Principal, RequestContext
from gateway.core.errors import GatewayError, RateLimited
from gateway.spend.budget_alerts import COUNTER_GRACE_S, HOUR_TTL_S, BudgetAlerts
from gateway.spend.budget_metrics import BudgetMetrics
from gateway.spend.leases import Leaseholder
from gateway.storage.budget_store import BudgetTable, ledger_spend
from gateway.storage.counters import (
    Admission,
    BudgetCheck,
    BudgetStore,
    CounterState,
    InProcessStore,
    Outcome,
    RateAdjustment,
    Settlement,
    StoreUnavailable,
    Verdict,
)
from gateway.storage.ledger import LedgerWriter
from policies.alerts import hour_key
from policies.budgets import Budget, Clock, Hold, Period, Scope, Subjects, Window, applicable, window
from policies.plans import Plan, plans_with
from policies.pricing import format_usd, from_pico, to_pico
from policies.rate_limits import SHARED, TEAM_SHARE, Limit, RateCheck

log = logging.getLogger("costgate.budgets")

UNITS = {
    Limit.REQUESTS_PER_MINUTE: "requests per minute",
    Limit.TOKENS_PER_MINUTE: "tokens per minute",
    Limit.TOKENS_PER_DAY: "tokens per day",
}


def build_store(settings: Settings) -> BudgetStore:
    backend = settings.budgets.backend
    if backend == "auto":
        backend = "redis" if settings.redis_url else "memory"
    if backend == "memory":
        return InProcessStore()
    if not settings.redis_url:
        raise ValueError("budgets.backend is redis but no redis_url is configured")
    from gateway.storage.redis_counters import RedisStore

    return RedisStore(settings.redis_url, settings.budgets.redis_prefix, settings.budgets.redis_timeout_s)


@dataclass(frozen=True, slots=True)
class BudgetView:
    budget: Budget
    window: Window
    state: CounterState
    alerts: dict[str, float]


class SpendControl:
    def __init__(
        self,
        settings: Settings,
        engine: AsyncEngine,
        ledger: LedgerWriter,
        registry: CollectorRegistry,
        clock: Clock = time.time,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.config = settings.budgets
        self.clock = clock
        self.store = build_store(settings)
        self.table = BudgetTable(engine, settings.budgets.refresh_s)
        self.engine = engine
        self.ledger = ledger
        self.plans = plans_with({name: p.overrides() for name, p in settings.plans.items()})
        self.limits = settings.rate_limits
        self.metrics = BudgetMetrics(registry)
        self.alerts = BudgetAlerts(self.store, settings.alerts, self.metrics, clock, transport)
        self._seed_lock = asyncio.Lock()
        # Settlements the store could not take (an outage, a lost reply), retried in order until
        # it does; settling is idempotent, so one that did land is not counted twice.
        self.unsettled: deque[Settlement] = deque(maxlen=100_000)
        self._upkeep_task: asyncio.Task[None] | None = None
        self.leases = Leaseholder(self.store, self.config.lease_s, self.metrics, clock)  # owns our holds
        self._last_outage_log = 0.0

    async def start(self) -> None:
        self.alerts.start()
        self._upkeep_task = asyncio.create_task(self._upkeep_loop(), name="budget-upkeep")

    async def stop(self) -> None:
        if self._upkeep_task is not None:
            self._upkeep_task.cancel()
        await self.retry_unsettled()
        if self.unsettled:
            log.error("shutdown with %d budget settlements not applied (the ledger has them)", len(self.unsettled))
        try:
            await self.leases.retire()  # what is still held goes now, not when the lease ends
        except StoreUnavailable as err:
            self.outage("retire", err)
        await self.alerts.close()
        await self.store.close()

    async def _upkeep_loop(self) -> None:
        """Retry queued settlements, renew this replica's lease, reclaim dead replicas' holds."""
        while True:
            await asyncio.sleep(self.leases.tick_s)
            await self.retry_unsettled()
            try:
                await self.leases.tick()
            except StoreUnavailable as err:
                self.outage("lease", err)

    async def retry_unsettled(self) -> int:
        """Apply queued settlements, oldest first, until the store fails again."""
        done = 0
        while self.unsettled:
            try:
                await self.store.settle(self.unsettled[0])
            except StoreUnavailable:
                break
            self.unsettled.popleft()
            done += 1
        return done

    # who pays
    def plan(self, name: str) -> Plan:
        return self.plans.get(name) or Plan(name)

    def team_limits(self, principal: Principal) -> TeamLimits:
        teams = self.limits.teams
        return teams.get(principal.team_id) or teams.get(principal.team_name) or self.limits.team

    async def budgets_for(self, principal: Principal, user: str | None, tags: Sequence[str]) -> list[Budget]:
        who = Subjects(principal.team_id, principal.key_id, user, tuple(tags))
        found = applicable(await self.table.current(), who)
        cap = self.plan(principal.plan).dollar_cap
        if cap is not None:
            found.append(Budget(Scope.KEY, principal.key_id, Period.TOTAL, to_pico(Decimal(cap)), ()))
        return found

    def request_checks(self, principal: Principal) -> list[RateCheck]:
        """The key's and the team's requests-per-minute limits, one request each."""
        wanted = (
            (f"key:{principal.key_id}", self.plan(principal.plan).requests_per_minute),
            (f"team:{principal.team_id}", self.team_limits(principal).requests_per_minute),
        )
        return [
            RateCheck(Limit.REQUESTS_PER_MINUTE, subject, maximum, 1)
            for subject, maximum in wanted
            if maximum is not None
        ]

    def rate_limited(self, check: RateCheck, retry_after_s: int | None) -> RateLimited:
        kind = check.subject.split(":")[0]
        self.metrics.refused.labels(check.limit.value, kind).inc()
        limit = f"{check.maximum} {UNITS[check.limit]}"
        if check.subject.startswith(SHARED):  # a model's provider limits, shared by the teams
            whole = check.subject.removeprefix(SHARED)
            model, share, _ = whole.rpartition(TEAM_SHARE)
            what, model = ("this team's share", model) if share else ("all teams' use", whole)
            return RateLimited(
                f"rate limit reached: {what} of model {model!r}'s provider limit, {limit}", retry_after=retry_after_s
            )
        return RateLimited(f"rate limit reached: {limit} for this {kind}", retry_after=retry_after_s)

    async def refusal(self, ctx: RequestContext, err: GatewayError) -> GatewayError:
        """The error to answer a refused request with: `err`, or a 429 once the key (or team)
        is over its request rate. A request admitted already was counted then."""
        if ctx.principal is None or ctx.decided.hold is not None or isinstance(err, RateLimited):
            return err
        return await self.count_refusal(ctx.principal, ctx.created_at) or err

    async def count_request(self, principal: Principal, now: float) -> RateLimited | None:
        """Count a request served outside the pipeline (POST /v1/feedback) against the key's and
        team's request rates, as admission counts the others; the 429 to answer once over."""
        return await self.count_refusal(principal, now)

    async def count_refusal(self, principal: Principal, now: float) -> RateLimited | None:
        """Count a request refused before admission (a bad body, an unknown model, a budget)
        against the key's and team's request rates, as admission counts the others: else a
        key could send unknown-model requests without end. Returns the 429 to answer instead
        once a limit is reached."""
        checks = tuple(self.request_checks(principal))
        if not checks:
            return None
        try:
            verdict = await self.store.admit(Admission("r" + secrets.token_hex(10), now, now, 0, checks))
        except StoreUnavailable as err:
            self.outage("admit", err)  # the refusal stands; only its counting is lost
            return None
        if verdict.outcome is not Outcome.RATE_LIMITED:
            return None
        return self.rate_limited(checks[verdict.failed or 0], verdict.retry_after_s)

    # admit and settle
    async def admit(self, admission: Admission, budgets: Sequence[Budget]) -> Verdict:
        for _attempt in range(3):
            verdict = await self.store.admit(admission)
            if verdict.outcome is not Outcome.UNINITIALIZED:
                return verdict
            await self.seed(verdict.missing, budgets, admission.now)
        raise StoreUnavailable("budget counters could not be seeded")

    async def seed(self, missing: Sequence[str], budgets: Sequence[Budget], now: float) -> None:
        """Start missing counters from what the ledger says was spent in their period."""
        by_counter = {b.counter(now): b for b in budgets}
        async with self._seed_lock:
            seeds: dict[str, tuple[int, int | None]] = {}
            try:
                await self.ledger.flush()  # this replica's queued rows count too
                for counter in missing:
                    b = by_counter[counter]
                    w = window(b.period, now)
                    spent = await ledger_spend(self.engine, b.scope, b.subject, w)
                    seeds[counter] = (spent, None if w.end is None else int(w.end - now) + COUNTER_GRACE_S)
            except SQLAlchemyError as err:  # no ledger, no starting point: as bad as no store
                raise StoreUnavailable(f"the ledger cannot be read to seed budget counters: {err}") from err
            await self.store.initialize(seeds)

    def outage(self, op: str, err: Exception) -> None:
        """Log (at most every 10 s) and count a store failure."""
        self.metrics.store_errors.labels(op, self.config.on_store_error).inc()
        now = time.monotonic()
        if now - self._last_outage_log >= 10:
            self._last_outage_log = now
            log.error("budget store failed during %s (failing %s): %s", op, self.config.on_store_error, err)

    async def settle(self, hold: Hold, cost_pusd: int, rates: Sequence[RateAdjustment], principal: Principal) -> None:
        counters = tuple(b.counter(hold.now) for b in hold.budgets)
        spent = await self.settle_counters(hold.id, hold.now, counters, cost_pusd, principal.team_id, rates)
        if cost_pusd and spent:
            try:
                await self.alerts.raise_for(hold, spent, principal.team_id)
            except StoreUnavailable as err:
                self.outage("alert", err)

    async def settle_counters(
        self,
        hold_id: str,
        now: float,
        counters: tuple[str, ...],
        cost_pusd: int,
        team_id: str,
        rates: Sequence[RateAdjustment] = (),
    ) -> list[int]:
        """Commit `cost_pusd` to the budget counters a hold was made on and to the hourly spend,
        and release the hold; returns the spend after it (empty if queued for later: the store
        is down). Also for a dead replica's streams, charged from its journal (no alerts)."""
        hour = hour_key(now)
        spend = ((f"spend:team:{team_id}:{hour}", HOUR_TTL_S), (f"spend:all:{hour}", HOUR_TTL_S))
        settlement = Settlement(hold_id, now, cost_pusd, counters, spend, tuple(rates))
        try:
            return await self.store.settle(settlement)
        except StoreUnavailable as err:
            self.outage("settle", err)
            if len(self.unsettled) == self.unsettled.maxlen:
                log.error("budget settlement queue full: the oldest is dropped (the ledger has it)")
            self.unsettled.append(settlement)
            return []

    # the admin view
    async def view(self, budgets: Sequence[Budget]) -> list[BudgetView]:
        """Each budget's spend and holds in its current period (seeded from the ledger if new)."""
        now = self.clock()
        reclaimed = await self.store.reclaim(now)
        if reclaimed:
            self.metrics.reclaimed.inc(reclaimed)
        counters = [b.counter(now) for b in budgets]
        states = await self.store.read(counters)
        missing = [c for c, s in zip(counters, states) if not s.initialized]
        if missing:
            await self.seed(missing, budgets, now)
            states = await self.store.read(counters)
        return [
            BudgetView(b, window(b.period, now), s, await self.store.alert_state(c))
            for b, c, s in zip(budgets, counters, states)
        ]

    async def rate_view(self, subjects: Sequence[str]) -> list[dict[str, str | float | None]]:
        """The current hour's spend and spend-rate alert for each subject (`all`, `team:<id>`)."""
        now = self.clock()
        hour = hour_key(now)
        states = await self.store.read([f"spend:{s}:{hour}" for s in subjects])
        out: list[dict[str, str | float | None]] = []
        for subject, state in zip(subjects, states):
            limit = (
                self.alerts.config.total_spend_rate_per_hour_usd
                if subject == "all"
                else self.alerts.config.spend_rate_per_hour_usd
            )
            fired = await self.store.alert_state(f"rate:{subject}:{hour}")
            out.append(
                {
                    "subject": subject,
                    "hour": hour,
                    "spent_usd": format_usd(from_pico(state.spent_pusd)),
                    "limit_per_hour_usd": None if limit is None else format_usd(Decimal(limit)),
                    "alerted_at": fired.get("rate"),
                }
            )
        return out


def budget_checks(budgets: Sequence[Budget], now: float) -> tuple[BudgetCheck, ...]:
    out = []
    for b in budgets:
        end = window(b.period, now).end
        out.append(
            BudgetCheck(b.counter(now), b.amount_pusd, None if end is None else int(end - now) + COUNTER_GRACE_S)
        )
    return tuple(out)
