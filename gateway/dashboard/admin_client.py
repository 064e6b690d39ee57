"""The dashboard's writes and listings go through the admin API itself (DESIGN.md contract),
called in-process over ASGI: one place validates teams, keys and budgets, and the dashboard
can never do something the API would refuse."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx
from starlette.types import ASGIApp


@dataclass(frozen=True, slots=True)
class AdminReply:
    status: int
    body: Any

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def error(self) -> str:
        if self.ok:
            return ""
        if isinstance(self.body, dict) and isinstance(self.body.get("error"), dict):
            return str(self.body["error"].get("message", "request refused"))
        return f"the admin API answered {self.status}"


class AdminClient:
    def __init__(self, app: ASGIApp, admin_key: str) -> None:
        self._app = app
        self._headers = {"authorization": f"Bearer {admin_key}"}

    async def call(self, method: str, path: str, json: Any = None, params: dict[str, str] | None = None) -> AdminReply:
        transport = httpx.ASGITransport(app=self._app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://costgate.internal", headers=self._headers, timeout=30
        ) as client:
            response = await client.request(method, path, json=json, params=params)
        try:
            body = response.json()
        except ValueError:
            body = response.text
        return AdminReply(response.status_code, body)

    async def data(self, path: str) -> list[dict[str, Any]]:
        """A listing's rows (`{"data": [...]}`); an empty list when the route is missing."""
        reply = await self.call("GET", path)
        if not reply.ok:
            return []
        body = reply.body
        if isinstance(body, dict):
            for field in ("data", "budgets", "rows"):
                if isinstance(body.get(field), list):
                    return body[field]
        return body if isinstance(body, list) else []
