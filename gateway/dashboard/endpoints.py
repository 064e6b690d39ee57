"""The dashboard at /admin/ui: sign-in, pages, and form actions.

Security: signing in takes the admin key (compared in constant time; wrong keys are limited
per client address and overall, login_limit.py) and sets an HttpOnly, SameSite=Strict cookie
holding a random session id (sessions.py). Bodies are capped (MAX_FORM_BYTES) by RequestGuard
before they are read. Every write is a POST that
must carry the session's CSRF token (form field `csrf` or header `x-csrf-token`) and, when the
browser sends one, an Origin equal to the gateway's own. Pages send a strict CSP.
"""

from __future__ import annotations

import hmac
import time
from urllib.parse import parse_qs, urlsplit

from fastapi import APIRouter, FastAPI, Request
from starlette.responses import RedirectResponse, Response

from gateway.config.settings import admin_key_file
from gateway.dashboard.admin_client import AdminClient
from gateway.dashboard.cache_view import CacheView
from gateway.dashboard.login_limit import LoginLimiter
from gateway.dashboard.pages import Pages
from gateway.dashboard.queries import DashboardQueries
from gateway.dashboard.rollup import Window
from gateway.dashboard.sessions import COOKIE, COOKIE_PATH, Session, SessionStore, csrf_valid
from gateway.dashboard.views import Views
from gateway.service import served_gateway

MAX_FORM_BYTES = 16 * 1024
WINDOWS = (1, 7, 30, 90)

router = APIRouter(prefix="/admin/ui", include_in_schema=False)


class Dashboard:
    """Everything the dashboard needs, built once per app by `install`."""

    def __init__(self, app: FastAPI) -> None:
        gateway = served_gateway(app)
        self.gateway = gateway
        self.sessions = SessionStore(gateway.db)
        self.pages = Pages()
        self.admin = AdminClient(app, gateway.admin_key)
        self.views = Views(self.admin, DashboardQueries(gateway.db), self.pages, gateway)
        self.cache = CacheView(self.admin, self.pages)
        c = gateway.settings.dashboard
        self.login_limit = LoginLimiter(c.login_attempts_per_address, c.login_attempts_overall, c.login_window_s)
        # The sign-in page says where a generated admin key is (service.py `admin_key_for`), so a
        # newcomer who set none can find it.
        settings = gateway.settings
        self.pages.env.globals["admin_key_file"] = (
            None if settings.admin_key else str(admin_key_file(settings.data_dir))
        )


def install(app: FastAPI) -> None:
    """Mount the dashboard on an app built by `create_app` (needs `app.state.gateway`)."""
    app.state.dashboard = Dashboard(app)
    app.include_router(router)


def _dash(request: Request) -> Dashboard:
    return request.app.state.dashboard


def _window(request: Request) -> Window:
    try:
        days = int(request.query_params.get("days", "30"))
    except ValueError:
        days = 30
    return Window.ending_at(time.time(), days if days in WINDOWS else 30)


async def _session(request: Request) -> Session | None:
    return await _dash(request).sessions.find(request.cookies.get(COOKIE))


def _to_login() -> Response:
    return RedirectResponse("/admin/ui/login", status_code=303)


def _same_origin(request: Request) -> bool:
    origin = request.headers.get("origin")
    if origin is None:  # not sent by every browser on same-origin posts; the CSRF token still applies
        return True
    # Behind a proxy that rewrites Host, the public host arrives as x-forwarded-host. A page on
    # another site cannot set that header on a form post, so trusting it here opens nothing.
    hosts = {request.headers.get("host", ""), *request.headers.get("x-forwarded-host", "").split(",")}
    return urlsplit(origin).netloc in {h.strip() for h in hosts if h.strip()}


def _https(request: Request) -> bool:
    """Whether the browser reached us over TLS (directly, or through a TLS-terminating proxy)."""
    forwarded = request.headers.get("x-forwarded-proto", "").split(",")[0].strip().lower()
    return request.url.scheme == "https" or forwarded == "https"


async def _form(request: Request) -> dict[str, str] | None:
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        return None
    return {k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True).items()}


async def _authorized_form(request: Request) -> tuple[Session, dict[str, str]] | Response:
    """The session and form of a write, or the response refusing it."""
    session = await _session(request)
    if session is None:
        return _to_login()
    form = await _form(request)
    token = request.headers.get("x-csrf-token") or (form or {}).get("csrf")
    if form is None or not _same_origin(request) or not csrf_valid(session.id, token):
        return _dash(request).pages.render(
            "error.html",
            status=403,
            session=session,
            message="This form expired or did not come from this dashboard. Reload the page and try again.",
        )
    return session, form


@router.get("/static/{name}")
async def static(name: str, request: Request) -> Response:
    return _dash(request).pages.static(name)


@router.get("/login")
async def login_page(request: Request) -> Response:
    return _dash(request).pages.render("login.html", session=None, error=None)


@router.post("/login")
async def login(request: Request) -> Response:
    dash = _dash(request)
    address = request.client.host if request.client else ""
    wait = dash.login_limit.retry_after(address)
    if wait is not None:
        refused = dash.pages.render(
            "login.html", status=429, session=None, error=f"Too many wrong keys: try again in {wait} s."
        )
        refused.headers["retry-after"] = str(wait)
        return refused
    form = await _form(request) or {}
    given = form.get("admin_key", "").strip().encode()
    if not _same_origin(request) or not hmac.compare_digest(given, dash.gateway.admin_key.encode()):
        dash.login_limit.failed(address)
        return dash.pages.render("login.html", status=401, session=None, error="That is not the admin key.")
    dash.login_limit.succeeded(address)
    session = await dash.sessions.create()
    response = RedirectResponse("/admin/ui", status_code=303)
    response.set_cookie(
        COOKIE,
        session.id,
        max_age=int(session.expires_at - time.time()),
        path=COOKIE_PATH,
        httponly=True,
        samesite="strict",
        secure=_https(request),
    )
    return response


@router.post("/logout")
async def logout(request: Request) -> Response:
    checked = await _authorized_form(request)
    if isinstance(checked, Response):
        return checked
    session, _ = checked
    await _dash(request).sessions.end(session.id)
    response = RedirectResponse("/admin/ui/login", status_code=303)
    response.delete_cookie(COOKIE, path=COOKIE_PATH, httponly=True, samesite="strict")
    return response


PAGES = {
    "": "overview",
    "/spend": "spend",
    "/keys": "keys",
    "/budgets": "budgets",
    "/savings": "savings",
    "/cascades": "cascades",
    "/whatif": "whatif",
    "/requests": "requests",
}


def _page_route(path: str, view: str) -> None:
    async def page(request: Request) -> Response:
        session = await _session(request)
        if session is None:
            return _to_login()
        return await getattr(_dash(request).views, view)(session, _window(request))

    router.add_api_route(path, page, methods=["GET"], name=f"dashboard_{view}")


for _path, _view in PAGES.items():
    _page_route(_path, _view)

ACTIONS = {
    "/teams": "create_team",
    "/keys": "create_key",
    "/keys/{key_id}/revoke": "revoke_key",
    "/keys/{key_id}/rotate": "rotate_key",
    "/budgets": "set_budget",
}


def _action_route(path: str, action: str) -> None:
    async def act(request: Request) -> Response:
        checked = await _authorized_form(request)
        if isinstance(checked, Response):
            return checked
        session, form = checked
        return await getattr(_dash(request).views, action)(session, form, **request.path_params)

    router.add_api_route(path, act, methods=["POST"], name=f"dashboard_{action}")


for _path, _action in ACTIONS.items():
    _action_route(_path, _action)


# The Cache page (cache_view.py): per team hits, savings and reported false hits, and the newest
# hits with a button that reports one wrong (POST /admin/feedback).
@router.get("/cache", name="dashboard_cache")
async def cache_page(request: Request) -> Response:
    session = await _session(request)
    if session is None:
        return _to_login()
    return await _dash(request).cache.page(session, _window(request), team=request.query_params.get("team") or None)


@router.post("/cache", name="dashboard_cache_report")  # the page's own URL: reloading the answer is a GET
async def cache_report(request: Request) -> Response:
    checked = await _authorized_form(request)
    if isinstance(checked, Response):
        return checked
    session, form = checked
    team = request.query_params.get("team") or None
    return await _dash(request).cache.report_wrong(session, _window(request), form, team=team)
