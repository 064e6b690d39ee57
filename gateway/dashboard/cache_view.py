"""The dashboard's Cache page (issue 12): per team its hit rate (exact and semantic), the dollars
its hits saved and the hits it reported wrong or right; and the newest hits, each with a
*Report wrong* button.

Everything comes from the admin API, called in-process like the dashboard's other listings and
writes (admin_client.py): GET /admin/cache/teams and /admin/cache/hits, and the button's form
post (CSRF-checked by the router) becomes POST /admin/feedback — the same report a team makes
with POST /v1/feedback: the entry that served the hit is purged, a semantic hit's pair is kept
as the team's label.
"""

from __future__ import annotations

import re
from typing import Any

from starlette.responses import Response

from gateway.dashboard.admin_client import AdminClient
from gateway.dashboard.pages import Pages
from gateway.dashboard.rollup import Window
from gateway.dashboard.sessions import Session

RECENT_HITS = 50
REQUEST_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class CacheView:
    def __init__(self, admin: AdminClient, pages: Pages) -> None:
        self.admin = admin
        self.pages = pages

    async def page(
        self,
        session: Session,
        window: Window,
        *,
        team: str | None = None,
        reported: dict[str, Any] | None = None,
        error: str | None = None,
        status: int = 200,
    ) -> Response:
        teams = await self.admin.call("GET", "/admin/cache/teams", params={"days": str(window.days)})
        params = {"limit": str(RECENT_HITS), **({"team": team} if team else {})}
        hits = await self.admin.call("GET", "/admin/cache/hits", params=params)
        problem = next((f"{r.status}: {r.error}" for r in (teams, hits) if not r.ok), None)
        return self.pages.render(
            "cache.html",
            status=status,
            session=session,
            csrf=session.csrf,
            days=window.days,
            page="cache",
            teams=teams.body["data"] if teams.ok else [],
            hits=hits.body["data"] if hits.ok else [],
            team=team,
            reported=reported,
            error=error or (f"The admin API answered {problem}" if problem else None),
        )

    async def report_wrong(
        self, session: Session, window: Window, form: dict[str, str], team: str | None = None
    ) -> Response:
        request_id = form.get("request_id", "").strip()
        if not REQUEST_ID.match(request_id):
            return await self.page(session, window, team=team, error="That is not a request id.", status=400)
        reply = await self.admin.call("POST", "/admin/feedback", json={"request_id": request_id, "verdict": "wrong"})
        if not reply.ok:
            return await self.page(session, window, team=team, error=reply.error, status=reply.status)
        return await self.page(session, window, team=team, reported=reply.body)
