"""`costgate reconcile --provider openai|anthropic --month YYYY-MM`: the ledger against the
provider's own cost report, per model and day (docs/budgets.md, "Reconciling with the
provider's invoice"). The admin key comes from OPENAI_ADMIN_KEY or ANTHROPIC_ADMIN_KEY."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from decimal import Decimal

from sqlalchemy.exc import SQLAlchemyError

from gateway.commands.command_config import read_config
from gateway.config.settings import Settings
from gateway.core.errors import GatewayError
from gateway.providers.cost_reports import BASE_VARIABLES, KEY_VARIABLES
from gateway.reconciler import reconcile_month
from gateway.storage.db import create_engine
from policies.pricing import format_usd
from policies.reconciliation import Line


def report(lines: list[Line]) -> str:
    """The lines as a table, and the month's totals."""
    rows = [f"{'day':<10}  {'model':<32} {'ledger $':>14} {'provider $':>14} {'difference $':>14}"]
    for line in lines:
        mark = "" if line.matches else "  <-"
        rows.append(
            f"{line.day:<10}  {line.model:<32} {format_usd(line.ledger_usd):>14} {format_usd(line.provider_usd):>14}"
            f" {format_usd(line.difference_usd):>14}{mark}"
        )
    ledger = sum((line.ledger_usd for line in lines), Decimal(0))
    billed = sum((line.provider_usd for line in lines), Decimal(0))
    rows.append(
        f"{'total':<10}  {'':<32} {format_usd(ledger):>14} {format_usd(billed):>14} {format_usd(billed - ledger):>14}"
    )
    return "\n".join(rows)


async def _run(settings: Settings, args: argparse.Namespace, key: str) -> list[Line]:
    engine = create_engine(settings.database_url)
    try:
        return await reconcile_month(
            engine,
            settings.models,
            args.provider,
            args.month,
            key,
            args.base_url or os.environ.get(BASE_VARIABLES[args.provider]),
            tuple(args.model or ()),
        )
    finally:
        await engine.dispose()


def run_reconcile(args: argparse.Namespace) -> int:
    variable = KEY_VARIABLES[args.provider]
    key = os.environ.get(variable)
    if not key:
        print(f"costgate reconcile: set {variable} to the provider's admin key", file=sys.stderr)
        return 2
    settings = read_config("reconcile", args.config)
    if settings is None:
        return 2
    try:
        lines = asyncio.run(_run(settings, args, key))
    except (GatewayError, SQLAlchemyError, OSError) as err:
        print(f"costgate reconcile: {' '.join(str(err).split())}", file=sys.stderr)
        return 1
    print(report(lines))
    return 0 if all(line.matches for line in lines) else 3


def add_commands(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("reconcile", help="the ledger against a provider's cost report, per model and day")
    parser.add_argument("--provider", choices=sorted(KEY_VARIABLES), required=True)
    parser.add_argument("--month", required=True, help="YYYY-MM (UTC)")
    parser.add_argument("--config", help="YAML config file (default: embedded defaults)")
    parser.add_argument("--base-url", help="the provider's API (default: $OPENAI_ADMIN_BASE_URL, else the public one)")
    parser.add_argument(
        "--model", action="append", help="a deployment the provider bills (repeat; default: found from the config)"
    )
    parser.set_defaults(run=run_reconcile)
