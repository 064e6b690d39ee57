"""Reconciliation (issue 26): the ledger against the provider's own cost report, per model and
day, through `GET /admin/reconcile` and `costgate reconcile`. The provider's usage is billed by
the Anthropic-style fake (tests/fakes/fake_anthropic_cache.py); its cost report and OpenAI's
are fakes of the organization cost APIs, served over HTTP from a local thread."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import httpx
import pytest
import yaml

from gateway.cli import main
from gateway.storage.db import create_engine
from gateway.storage.ledger import LedgerRow, LedgerWriter
from gateway.storage.migrate import upgrade_schema
from policies.reconciliation import model_family, reconcile
from tests.fakes.fake_anthropic_cache import AnthropicCacheFake
from tests.fakes.fake_cost_reports import cost_reports_app
from tests.gateway.in_process import anthropic_client, http_client, new_key, running_app, settings_for
from tests.support import ThreadServer

ADMIN = "sk-cg-admin-reconcile"
PROVIDER_ADMIN = "sk-admin-provider-reconcile"
TODAY = datetime.now(UTC).strftime("%Y-%m-%d")  # for rows a test writes itself, at its own date
MONTH = TODAY[:7]
NO_CACHE = {"exact": {"enabled": False}, "semantic": {"enabled": False}}


def other_day(day: str) -> str:
    """Another day of the same month."""
    return day[:7] + ("-01" if not day.endswith("-01") else "-02")


OTHER_DAY = other_day(TODAY)


@pytest.mark.parametrize(
    "name, family",
    [
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
        ("openai/gpt-4o-mini", "gpt-4o-mini"),
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("anthropic/claude-sonnet-4-5", "claude-sonnet-4-5"),
    ],
)
def test_model_family(name: str, family: str) -> None:
    assert model_family(name) == family


def test_reconcile_lines_show_each_side() -> None:
    lines = reconcile({("d1", "m"): Decimal("1.00")}, {("d1", "m"): Decimal("1.004"), ("d2", "m"): Decimal("2")})
    assert [(x.day, x.difference_usd, x.matches) for x in lines] == [
        ("d1", Decimal("0.004"), True),
        ("d2", Decimal(2), False),
    ]


async def test_admin_reconcile_against_anthropics_cost_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = AnthropicCacheFake(min_tokens=1024)
    settings = settings_for(tmp_path, [fake.deployment()], admin_key=ADMIN, cache=NO_CACHE)
    async with running_app(settings, httpx.ASGITransport(app=fake.app)) as app:
        client = anthropic_client(app, await new_key(app, "recon"))
        system = [{"type": "text", "text": "Rules of the house. " * 400}]
        for question in ("one", "two", "three"):
            await client.messages.create(
                model="claude", max_tokens=20, system=system, messages=[{"role": "user", "content": question}]
            )
        # The day the calls were made (not the day the tests were collected: a run may cross
        # midnight). The provider's report names the model with its release date, and shows other
        # traffic on the same account (another day) that never went through the gateway.
        (day,) = {d for d, _ in fake.bill.by_day_model}
        billed = {(d, model + "-20250929"): usd for (d, model), usd in fake.bill.by_day_model.items()}
        billed[(other_day(day), "claude-sonnet-4-5-20250929")] = Decimal("1.25")
        reports = ThreadServer(cost_reports_app({}, billed, PROVIDER_ADMIN))
        monkeypatch.setenv("ANTHROPIC_ADMIN_KEY", PROVIDER_ADMIN)
        monkeypatch.setenv("ANTHROPIC_ADMIN_BASE_URL", reports.base)
        try:
            async with http_client(app) as http:
                auth = {"authorization": f"Bearer {ADMIN}"}
                answer = await http.get(f"/admin/reconcile?provider=anthropic&month={day[:7]}", headers=auth)
                refused = await http.get("/admin/reconcile?provider=anthropic&month=2026-13", headers=auth)
        finally:
            await asyncio.to_thread(reports.stop)
    assert answer.status_code == 200, answer.text
    rows = {(r["day"], r["model"]): r for r in answer.json()["rows"]}
    today = rows[(day, "claude-sonnet-4-5")]
    assert Decimal(today["ledger_usd"]) == fake.bill.total() > 0 and Decimal(today["difference_usd"]) == 0
    other = rows[(other_day(day), "claude-sonnet-4-5")]  # what cannot reconcile: traffic the gateway never saw
    assert (Decimal(other["ledger_usd"]), Decimal(other["provider_usd"])) == (0, Decimal("1.25"))
    assert refused.status_code in (400, 422)


def test_cli_reconciles_openai_and_says_where_it_differs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "ledger.db"
    asyncio.run(
        _ledger_rows(f"sqlite:///{db}", [("small", TODAY, Decimal("0.012345")), ("small", OTHER_DAY, Decimal("0.5"))])
    )
    config = tmp_path / "costgate.yaml"
    model = {
        "name": "small",
        "model": "gpt-4o-mini",
        "api_base": "http://up.test/v1",
        "price": {"input_per_mtok": 1, "output_per_mtok": 2},
    }
    config.write_text(yaml.safe_dump({"database_url": f"sqlite:///{db}", "models": [model]}))
    billed = {
        (TODAY, "gpt-4o-mini-2024-07-18"): Decimal("0.012345"),
        (OTHER_DAY, "gpt-4o-mini-2024-07-18"): Decimal("0.75"),
    }
    reports = ThreadServer(cost_reports_app(billed, {}, PROVIDER_ADMIN))
    try:
        monkeypatch.setenv("OPENAI_ADMIN_KEY", PROVIDER_ADMIN)
        args = [
            "reconcile",
            "--provider",
            "openai",
            "--month",
            MONTH,
            "--config",
            str(config),
            "--base-url",
            reports.base,
        ]
        code = main([*args, "--model", "small"])
        out = capsys.readouterr().out
        monkeypatch.setenv("OPENAI_ADMIN_KEY", "wrong")
        refused = main([*args, "--model", "small"])
    finally:
        reports.stop()
    assert code == 3  # one day differs
    lines = {line.split()[0]: line.split() for line in out.splitlines()[1:]}
    assert lines[TODAY][1:] == ["gpt-4o-mini", "0.012345", "0.012345", "0"]
    assert lines[OTHER_DAY][1:5] == ["gpt-4o-mini", "0.5", "0.75", "0.25"]
    assert refused == 1


async def _ledger_rows(url: str, rows: list[tuple[str, str, Decimal]]) -> None:
    engine = create_engine(url)
    try:
        await upgrade_schema(engine)
        writer = LedgerWriter(engine)
        ts = {day: datetime.strptime(day, "%Y-%m-%d").replace(tzinfo=UTC).timestamp() + 3600 for _, day, _ in rows}
        await writer.insert(
            [
                LedgerRow(
                    f"req_{i}",
                    ts[day],
                    day,
                    "team_x",
                    "key_x",
                    None,
                    None,
                    None,
                    "chat.completions",
                    model,
                    model,
                    "openai",
                    10,
                    5,
                    0,
                    int(usd * 10**12),
                    0,
                    1.0,
                    None,
                    "miss",
                    200,
                    None,
                ).as_dict()
                for i, (model, day, usd) in enumerate(rows)
            ]
        )
    finally:
        await engine.dispose()


async def test_a_request_whose_calls_went_to_several_models_counts_each_under_its_own(tmp_path: Path) -> None:
    from gateway.core.context import Endpoint, RequestContext
    from gateway.storage.ledger import cost_by_day_and_model
    from policies.pricing import Bill, Usage

    def escalated(request_id: str, served: str | None) -> LedgerRow:
        ctx = RequestContext(request_id=request_id, endpoint=Endpoint.CHAT, body={}, api_key=None, headers={})
        ctx.meter.add_call("cheap", Usage(100, 10), Bill(Decimal("0.001")))
        ctx.meter.add_call("strong", Usage(100, 10), Bill(Decimal("0.02")))
        ctx.outcome.served_model = served
        return LedgerRow.from_context(ctx)

    alone = RequestContext(request_id="r-alone", endpoint=Endpoint.CHAT, body={}, api_key=None, headers={})
    alone.meter.add_call("strong", Usage(10, 1), Bill(Decimal("0.5")))
    alone.outcome.served_model = "strong"
    engine = create_engine(f"sqlite:///{tmp_path / 'l.db'}")
    try:
        await upgrade_schema(engine)
        rows = [escalated("r-1", "strong"), escalated("r-2", None), LedgerRow.from_context(alone)]
        assert rows[2].cost_split is None  # one model: the row's columns say it all
        await LedgerWriter(engine).insert([r.as_dict() for r in rows])
        day = rows[0].day
        assert await cost_by_day_and_model(engine, day, day) == {
            (day, "cheap"): Decimal("0.002"),
            (day, "strong"): Decimal("0.54"),  # a failed request's billed calls too (served None)
        }
    finally:
        await engine.dispose()
