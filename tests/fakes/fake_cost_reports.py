"""Fakes of the providers' organization cost reports (issue 26), as their APIs answer:

- OpenAI `GET /v1/organization/costs`: daily buckets (`start_time` in Unix seconds), results
  grouped by `line_item` ("<model>, input" / "<model>, output"), `amount.value` in dollars;
- Anthropic `GET /v1/organizations/cost_report`: daily buckets (`starting_at` RFC 3339),
  results grouped by description with `model`, `amount` in cents as a decimal string.

One bucket a page, so a reader must follow `next_page`. A wrong admin key is a 401."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from decimal import Decimal

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

Costs = Mapping[tuple[str, str], Decimal]  # (day, the provider's model name) -> dollars


def cost_reports_app(openai: Costs, anthropic: Costs, admin_key: str) -> Starlette:
    async def openai_costs(request: Request) -> JSONResponse:
        if request.headers.get("authorization") != f"Bearer {admin_key}":
            return JSONResponse({"error": {"message": "invalid admin key", "type": "invalid_request_error"}}, 401)
        days = _days(openai, int(request.query_params["start_time"]), int(request.query_params["end_time"]))
        page = int(request.query_params.get("page") or 0)
        day = days[page] if page < len(days) else None
        results = []
        for (d, model), usd in sorted(openai.items()):
            if d == day:  # split into the input and output line items a real report shows
                half = (usd / 3).quantize(Decimal("0.000001"))
                results += [_openai_item(f"{model}, input", half), _openai_item(f"{model}, output", usd - half)]
        bucket = {"object": "bucket", "start_time": _ts(day), "end_time": _ts(day) + 86400, "results": results}
        more = page + 1 < len(days)
        return JSONResponse(
            {
                "object": "page",
                "data": [bucket] if day else [],
                "has_more": more,
                "next_page": str(page + 1) if more else None,
            }
        )

    async def anthropic_costs(request: Request) -> JSONResponse:
        if request.headers.get("x-api-key") != admin_key:
            return JSONResponse({"type": "error", "error": {"type": "authentication_error", "message": "bad key"}}, 401)
        start = datetime.fromisoformat(request.query_params["starting_at"].replace("Z", "+00:00"))
        end = datetime.fromisoformat(request.query_params["ending_at"].replace("Z", "+00:00"))
        days = _days(anthropic, int(start.timestamp()), int(end.timestamp()))
        page = int(request.query_params.get("page") or 0)
        day = days[page] if page < len(days) else None
        results = [
            {
                "amount": format(usd * 100, "f"),
                "currency": "USD",
                "model": model,
                "cost_type": "tokens",
                "description": model,
            }
            for (d, model), usd in sorted(anthropic.items())
            if d == day
        ]
        bucket = {"starting_at": f"{day}T00:00:00Z", "ending_at": f"{day}T23:59:59Z", "results": results}
        more = page + 1 < len(days)
        return JSONResponse(
            {"data": [bucket] if day else [], "has_more": more, "next_page": str(page + 1) if more else None}
        )

    return Starlette(
        routes=[
            Route("/v1/organization/costs", openai_costs),
            Route("/v1/organizations/cost_report", anthropic_costs),
        ]
    )


def _openai_item(line_item: str, usd: Decimal) -> dict:
    return {
        "object": "organization.costs.result",
        "amount": {"value": float(usd), "currency": "usd"},
        "line_item": line_item,
    }


def _ts(day: str | None) -> int:
    return int(datetime.strptime(day or "1970-01-01", "%Y-%m-%d").replace(tzinfo=UTC).timestamp())


def _days(costs: Costs, start: int, end: int) -> list[str]:
    return sorted({d for d, _ in costs if start <= _ts(d) < end})
