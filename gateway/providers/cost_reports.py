"""What a provider says it billed, by day and model: its organization cost report, read with an
admin key (never a gateway's request key).

- OpenAI: `GET /v1/organization/costs?start_time=&end_time=&bucket_width=1d&group_by=line_item`,
  `Authorization: Bearer $OPENAI_ADMIN_KEY`. Each bucket's results carry `amount.value` in
  dollars and a `line_item` such as `gpt-4o-mini-2024-07-18, input`: the model is what comes
  before the last comma.
- Anthropic: `GET /v1/organizations/cost_report?starting_at=&ending_at=&bucket_width=1d&group_by[]=description`,
  `x-api-key: $ANTHROPIC_ADMIN_KEY`. Each bucket's results carry `amount` in cents as a decimal
  string and the `model` (null for costs that are not tokens: web search, code execution,
  which are reported under "(other)").

Both are paged (`has_more`, `next_page`). The base URL is configurable, so tests point at fakes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Literal

import httpx

from gateway.core.errors import GatewayError
from policies.reconciliation import summed

Provider = Literal["openai", "anthropic"]
OTHER = "(other)"
BASES: dict[str, str] = {"openai": "https://api.openai.com", "anthropic": "https://api.anthropic.com"}
KEY_VARIABLES: dict[str, str] = {"openai": "OPENAI_ADMIN_KEY", "anthropic": "ANTHROPIC_ADMIN_KEY"}
# Where the cost report is read (unset: the public API): a proxy, or a test's fake. From the
# environment only, like the key: an admin request cannot send the key somewhere else.
BASE_VARIABLES: dict[str, str] = {"openai": "OPENAI_ADMIN_BASE_URL", "anthropic": "ANTHROPIC_ADMIN_BASE_URL"}


class CostReportError(GatewayError):
    status = 502
    code = "cost_report_failed"


@dataclass(frozen=True, slots=True)
class Month:
    start: datetime
    end: datetime  # exclusive

    @classmethod
    def parse(cls, text: str) -> Month:
        start = datetime.strptime(text, "%Y-%m").replace(tzinfo=UTC)
        end = start.replace(year=start.year + 1, month=1) if start.month == 12 else start.replace(month=start.month + 1)
        return cls(start, end)


Costs = dict[tuple[str, str], Decimal]


async def provider_costs(
    provider: Provider,
    month: Month,
    admin_key: str,
    base_url: str | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> Costs:
    """Dollars by (UTC day, the provider's model name) for the month."""
    base = (base_url or BASES[provider]).rstrip("/")
    async with httpx.AsyncClient(base_url=base, transport=transport, timeout=60) as http:
        if provider == "openai":
            return await _collect(
                _pages(http, "/v1/organization/costs", _openai_query(month), _openai_headers(admin_key)), _openai_rows
            )
        return await _collect(
            _pages(http, "/v1/organizations/cost_report", _anthropic_query(month), _anthropic_headers(admin_key)),
            _anthropic_rows,
        )


def _openai_query(month: Month) -> dict[str, Any]:
    return {
        "start_time": int(month.start.timestamp()),
        "end_time": int(month.end.timestamp()),
        "bucket_width": "1d",
        "group_by": "line_item",
        "limit": 31,
    }


def _openai_headers(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


def _anthropic_query(month: Month) -> dict[str, Any]:
    return {
        "starting_at": month.start.isoformat().replace("+00:00", "Z"),
        "ending_at": month.end.isoformat().replace("+00:00", "Z"),
        "bucket_width": "1d",
        "group_by[]": "description",
        "limit": 31,
    }


def _anthropic_headers(key: str) -> dict[str, str]:
    return {"x-api-key": key, "anthropic-version": "2023-06-01"}


async def _pages(
    http: httpx.AsyncClient, path: str, query: dict[str, Any], headers: dict[str, str]
) -> AsyncIterator[dict[str, Any]]:
    page: str | None = None
    while True:
        params = dict(query, **({"page": page} if page else {}))
        try:
            response = await http.get(path, params=params, headers=headers)
        except httpx.HTTPError as err:
            raise CostReportError(f"cost report {path}: {type(err).__name__}") from err
        if response.status_code != 200:
            raise CostReportError(
                f"cost report {path}: the provider answered {response.status_code}: {response.text[:300]}"
            )
        body = response.json()
        for bucket in body.get("data") or ():
            yield bucket
        page = body.get("next_page")
        if not body.get("has_more") or not page:
            return


async def _collect(
    buckets: AsyncIterator[dict[str, Any]], rows: Callable[[dict[str, Any]], list[tuple[str, Decimal]]]
) -> Costs:
    return summed([((_day(bucket), model), usd) async for bucket in buckets for model, usd in rows(bucket)])


def _day(bucket: dict[str, Any]) -> str:
    start = bucket.get("start_time", bucket.get("starting_at"))
    if isinstance(start, int | float):
        return datetime.fromtimestamp(start, UTC).strftime("%Y-%m-%d")
    return str(start)[:10]


def _openai_rows(bucket: dict[str, Any]) -> list[tuple[str, Decimal]]:
    out = []
    for result in bucket.get("results") or ():
        amount = (result.get("amount") or {}).get("value")
        item = result.get("line_item") or ""
        model = item.rsplit(",", 1)[0].strip() if "," in item else (item.strip() or OTHER)
        if amount is not None:
            out.append((model, Decimal(str(amount))))  # str(): a float's binary error stays out
    return out


def _anthropic_rows(bucket: dict[str, Any]) -> list[tuple[str, Decimal]]:
    out = []
    for result in bucket.get("results") or ():
        amount = result.get("amount")
        if amount is not None:
            out.append((result.get("model") or OTHER, Decimal(str(amount)) / 100))  # cents
    return out
