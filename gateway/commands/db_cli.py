"""`costgate db upgrade` and `costgate db current`: the schema of the config's database.

`costgate serve` upgrades at every start too (under the same lock), so this command is for
operators who migrate before they roll out replicas, or who want to see where a database is.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from sqlalchemy.exc import SQLAlchemyError

from gateway.commands.command_config import read_config
from gateway.storage.db import create_engine
from gateway.storage.migrate import current_revision, head_revision, upgrade_schema


async def _run(url: str, upgrade: bool) -> str | None:
    engine = create_engine(url)
    try:
        if upgrade:
            await upgrade_schema(engine)
        return await current_revision(engine)
    finally:
        await engine.dispose()


def run_db(args: argparse.Namespace) -> int:
    settings = read_config("db", args.config)
    if settings is None:
        return 2
    try:
        revision = asyncio.run(_run(settings.database_url, args.db_command == "upgrade"))
    except (SQLAlchemyError, OSError) as err:
        print(f"costgate db: {' '.join(str(err).split())}", file=sys.stderr)
        return 1
    head = head_revision()
    where = "at head" if revision == head else f"behind head {head}: run `costgate db upgrade`"
    print(f"database schema revision {revision or 'none'} ({where})")
    return 0


def add_commands(commands: argparse._SubParsersAction) -> None:
    db = commands.add_parser("db", help="the database's schema (Alembic migrations)")
    sub = db.add_subparsers(dest="db_command", required=True)
    for name, help_text in (
        ("upgrade", "bring the schema to the newest revision (serve does it at start too)"),
        ("current", "print the schema revision the database is at"),
    ):
        parser = sub.add_parser(name, help=help_text)
        parser.add_argument("--config", help="YAML config file (default: embedded defaults)")
        parser.set_defaults(run=run_db)
