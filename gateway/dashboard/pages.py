"""HTML rendering: Jinja2 templates shipped inside the package, autoescaped, with a strict CSP."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from importlib.resources import files
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup
from starlette.responses import HTMLResponse, Response

from policies.pricing import format_usd

STATIC = {"dashboard.css": "text/css; charset=utf-8", "dashboard.js": "text/javascript; charset=utf-8"}

# Everything the pages load comes from the gateway itself; inline scripts and styles are refused.
SECURITY_HEADERS = {
    "content-security-policy": "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",  # "no-referrer" would make browsers send `Origin: null` on form posts
    "cache-control": "no-store",
}


def _decimal(value: Any) -> Decimal | None:
    try:
        return value if isinstance(value, Decimal) else Decimal(str(value))
    except (InvalidOperation, ValueError):
        return None


def usd(value: Any) -> str:
    """Dollars for people: cents when large, more digits when tiny (per-request costs)."""
    amount = _decimal(value)
    if amount is None:
        return str(value)
    if abs(amount) >= 1:
        return f"${amount:,.2f}"
    return "$" + format_usd(amount) if amount else "$0"


WHOLE_DOLLARS_FROM = Decimal(100_000)  # a tile drops the cents from here: "$3,703,704", not "$3,703,703.70"


def usd_short(value: Any) -> str:
    """Dollars for a tile, at most about ten characters: three significant digits below $1 (a
    local model's spend can be $0.000000001851851851851852), cents up to $100,000, whole dollars
    above. The exact figure (`usd_exact`) goes beside it, in the tile's tooltip."""
    amount = _decimal(value)
    if amount is None:
        return str(value)
    if abs(amount) >= WHOLE_DOLLARS_FROM:
        return f"${amount:,.0f}"
    if abs(amount) >= 1 or not amount:
        return usd(amount)
    return "$" + format_usd(amount.quantize(Decimal(1).scaleb(amount.adjusted() - 2)))


def usd_exact(value: Any) -> str:
    """Every digit, for a tooltip beside a rounded figure."""
    amount = _decimal(value)
    return str(value) if amount is None else format_usd(amount)


def pct(value: float) -> str:
    return f"{value * 100:.1f}%"


def when(epoch: float | None) -> str:
    if epoch is None:
        return ""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S")


class Pages:
    def __init__(self) -> None:
        self.env = Environment(
            loader=PackageLoader("gateway.dashboard", "templates"),
            autoescape=select_autoescape(default=True),
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.env.filters.update(usd=usd, usd_short=usd_short, usd_exact=usd_exact, pct=pct, when=when, svg=Markup)
        self._static = {name: (files("gateway.dashboard") / "static" / name).read_bytes() for name in STATIC}

    def render(self, template: str, status: int = 200, **context: Any) -> HTMLResponse:
        html = self.env.get_template(template).render(**context)
        return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)

    def static(self, name: str) -> Response:
        if name not in STATIC:
            return Response("not found", status_code=404)
        return Response(
            self._static[name],
            media_type=STATIC[name],
            headers={"cache-control": "max-age=3600", "x-content-type-options": "nosniff"},
        )
