"""One method per dashboard page or form action: gather the data, render the template."""

from __future__ import annotations

import time
from decimal import Decimal, InvalidOperation
from typing import Any
from urllib.parse import quote

from starlette.responses import RedirectResponse, Response

from gateway.dashboard.admin_client import AdminClient
from gateway.dashboard.budget_view import budget_rows
from gateway.dashboard.charts import curve_lines, stacked_bars, top_series
from gateway.dashboard.pages import Pages
from gateway.dashboard.queries import DashboardQueries
from gateway.dashboard.rollup import Window
from gateway.dashboard.sessions import Session

CHART_SERIES = 7  # the biggest seven, the rest as "other": a legend people can read


class Views:
    def __init__(self, admin: AdminClient, queries: DashboardQueries, pages: Pages, gateway: Any) -> None:
        self.admin = admin
        self.queries = queries
        self.pages = pages
        self.gateway = gateway

    def _render(
        self, template: str, session: Session, window: Window | None = None, status: int = 200, **context: Any
    ) -> Response:
        return self.pages.render(
            template, status=status, session=session, csrf=session.csrf, days=window.days if window else None, **context
        )

    async def _team_names(self) -> dict[str, str]:
        return {t["id"]: t["name"] for t in await self.admin.data("/admin/teams")}

    async def _chart(self, window: Window, dimension: str, names: dict[str, str], title: str) -> str:
        series = top_series(await self.queries.spend_series(window, dimension, names), CHART_SERIES)
        return stacked_bars(window.labels(), series, title=title)

    # pages
    async def overview(self, session: Session, window: Window) -> Response:
        await self.queries.rollup.advance(time.time())
        names = await self._team_names()
        chart = await self._chart(window, "team_id", names, "Spend per day by team")
        summary = await self.queries.summary(window)
        return self._render(
            "overview.html",
            session,
            window,
            page="overview",
            chart=chart,
            totals=summary.totals(),
            cache=summary.cache(),
            spenders=summary.top_spenders(names),
        )

    async def spend(self, session: Session, window: Window) -> Response:
        await self.queries.rollup.advance(time.time())
        names = await self._team_names()
        by_team = await self._chart(window, "team_id", names, "Spend per day by team")
        by_model = await self._chart(window, "served_model", {}, "Spend per day by model")
        summary = await self.queries.summary(window)
        return self._render(
            "spend.html",
            session,
            window,
            page="spend",
            by_team=by_team,
            by_model=by_model,
            spenders=summary.top_spenders(names, limit=50),
        )

    async def savings(self, session: Session, window: Window) -> Response:
        await self.queries.rollup.advance(time.time())
        summary = await self.queries.summary(window)
        cascades = [(c.name, tuple(c.tiers)) for c in self.gateway.settings.cascades]
        prices = {name: dep.price for name, dep in self.gateway.deployments.items()}
        return self._render(
            "savings.html",
            session,
            window,
            page="savings",
            cache=summary.cache(),
            totals=summary.totals(),
            cascades=summary.cascades(cascades, prices),
            provider=await self._provider_savings(window),
        )

    async def _provider_savings(self, window: Window) -> list[dict[str, str]]:
        """Per team, what the providers' prompt caches and batch/flex tiers saved (issue 26)."""
        path = f"/admin/spend?group_by=team&start={window.first}&end={window.today.isoformat()}"
        reply = await self.admin.call("GET", path)
        rows = reply.body.get("rows", []) if reply.ok and isinstance(reply.body, dict) else []
        names = await self._team_names()
        return [
            {
                "team": names.get(r.get("group") or "", r.get("group") or "(none)"),
                "cache": r.get("provider_cache_saved_usd", "0"),
                "batch": r.get("provider_batch_saved_usd", "0"),
            }
            for r in rows
            if r.get("provider_cache_saved_usd", "0") != "0" or r.get("provider_batch_saved_usd", "0") != "0"
        ]

    async def cascades(self, session: Session, window: Window) -> Response:
        reply = await self.admin.call("GET", "/admin/cascades")
        rows = reply.body.get("data", []) if reply.ok and isinstance(reply.body, dict) else []
        missing = None if reply.ok else f"GET /admin/cascades answered {reply.status}: {reply.error}"
        charts = {c.get("name"): learning_chart(c.get("learning_curve") or []) for c in rows if isinstance(c, dict)}
        return self._render("cascades.html", session, page="cascades", cascades=rows, missing=missing, curves=charts)

    async def whatif(self, session: Session, window: Window) -> Response:
        """What each cascade would do on its recorded traffic (GET /admin/cascades/{name}/whatif)."""
        reports, missing = [], []
        for c in self.gateway.settings.cascades:
            reply = await self.admin.call(
                "GET", f"/admin/cascades/{quote(c.name, safe='')}/whatif", params={"draws": "3"}
            )
            if reply.ok and isinstance(reply.body, dict):
                reports.append(reply.body)
            else:
                missing.append(f"{c.name}: GET /admin/cascades/{c.name}/whatif answered {reply.status}")
        return self._render("whatif.html", session, page="whatif", reports=reports, missing="; ".join(missing) or None)

    async def requests(self, session: Session, window: Window) -> Response:
        return self._render(
            "requests.html",
            session,
            page="requests",  # no window: the newest rows
            rows=await self.queries.recent(await self._team_names(), limit=100),
        )

    async def keys(
        self,
        session: Session,
        window: Window | None = None,
        *,
        secret: dict[str, str] | None = None,
        error: str | None = None,
        status: int = 200,
    ) -> Response:
        names = await self._team_names()
        keys = await self.admin.data("/admin/keys")
        for k in keys:
            k["team"] = names.get(k.get("team_id", ""), k.get("team_id", ""))
        return self._render(
            "keys.html",
            session,
            page="keys",
            teams=sorted(names.values()),
            keys=keys,
            models=sorted(self.gateway.targets),
            secret=secret,
            error=error,
            status=status,
        )

    async def budgets(
        self, session: Session, window: Window | None = None, *, error: str | None = None, status: int = 200
    ) -> Response:
        reply = await self.admin.call("GET", "/admin/budgets")
        rows = budget_rows(reply.body, await self._team_names()) if reply.ok else []
        missing = None if reply.ok else f"GET /admin/budgets answered {reply.status}: {reply.error}"
        return self._render(
            "budgets.html",
            session,
            page="budgets",
            budgets=rows,
            missing=missing,
            teams=sorted((await self._team_names()).values()),
            error=error,
            status=status,
        )

    # actions (form posts, CSRF already checked)
    async def create_team(self, session: Session, form: dict[str, str]) -> Response:
        reply = await self.admin.call("POST", "/admin/teams", json={"name": form.get("name", "").strip()})
        if not reply.ok:
            return await self.keys(session, error=reply.error, status=reply.status)
        return RedirectResponse("/admin/ui/keys", status_code=303)

    async def create_key(self, session: Session, form: dict[str, str]) -> Response:
        body: dict[str, Any] = {"team": form.get("team", ""), "plan": form.get("plan") or "pro"}
        if form.get("name"):
            body["name"] = form["name"]
        models = [m.strip() for m in form.get("models", "").split(",") if m.strip()]
        if models:
            body["models"] = models
        reply = await self.admin.call("POST", "/admin/keys", json=body)
        if not reply.ok:
            return await self.keys(session, error=reply.error, status=reply.status)
        return await self.keys(session, secret={"id": reply.body["id"], "key": reply.body["key"], "what": "created"})

    async def revoke_key(self, session: Session, form: dict[str, str], key_id: str) -> Response:
        reply = await self.admin.call("DELETE", f"/admin/keys/{key_id}")
        if not reply.ok:
            return await self.keys(session, error=reply.error, status=reply.status)
        return RedirectResponse("/admin/ui/keys", status_code=303)

    async def rotate_key(self, session: Session, form: dict[str, str], key_id: str) -> Response:
        reply = await self.admin.call("POST", f"/admin/keys/{key_id}/rotate")
        if not reply.ok:
            return await self.keys(session, error=reply.error, status=reply.status)
        return await self.keys(session, secret={"id": key_id, "key": reply.body["key"], "what": "rotated"})

    async def set_budget(self, session: Session, form: dict[str, str]) -> Response:
        try:
            amount = str(Decimal(form.get("amount_usd", "").strip()))
        except InvalidOperation:
            return await self.budgets(session, error="The amount must be a number of dollars.", status=400)
        body: dict[str, Any] = {
            "scope": form.get("scope", "team"),
            "id": form.get("id", "").strip(),
            "amount_usd": amount,
            "period": form.get("period", "monthly"),
        }
        reply = await self.admin.call("PUT", "/admin/budgets", json=body)
        if not reply.ok:
            return await self.budgets(session, error=reply.error, status=reply.status)
        return RedirectResponse("/admin/ui/budgets", status_code=303)


def learning_chart(curve: list[dict]) -> str:
    """A cascade's learning curve (GET /admin/cascades `learning_curve`) as an inline chart: its
    cost against the last tier alone, and the quality its controller estimated, with the bound."""
    points = [
        (float(p["requests"]), (p.get("cost_ratio"), p.get("quality"), p.get("quality_lower_bound")))
        for p in curve
        if isinstance(p, dict) and isinstance(p.get("requests"), int)
    ]
    return curve_lines(points, ("cost vs last tier", "quality (est.)", "quality lower bound"))
