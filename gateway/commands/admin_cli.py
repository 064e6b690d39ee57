"""`costgate teams | keys | budgets`: the admin API from a terminal.

    costgate teams create search              costgate teams list
    costgate keys create --team search [--name N] [--model M]... [--plan pro] [--tag T]... [--expires-at ISO]
    costgate keys list [--team search]        costgate keys rotate KEY_ID     costgate keys revoke KEY_ID
    costgate budgets set --scope team --id search --amount 400 --period monthly [--alert-at 0.5,0.8,1]
    costgate budgets list                     costgate budgets delete BUDGET_ID

They talk to a running gateway (`--url`, default `$COSTGATE_URL` or http://127.0.0.1:4000) with
the admin key from `$COSTGATE_ADMIN_KEY`, else the file the gateway generated
(`<--data-dir>/admin_key`, default ./costgate-data). Lists print aligned columns, `--json` the
API's own JSON. A refusal prints the API's message and exits 1; a missing key or an unreachable
gateway says so and exits 2.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from gateway.config.settings import admin_key_file

USAGE_EXIT = 2
REFUSED_EXIT = 1
DEFAULT_URL = "http://127.0.0.1:4000"


class CommandFailed(Exception):
    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class ApiCall:
    """One admin API request, and how its answer is printed."""

    method: str
    path: str
    show: Callable[[dict[str, Any]], str]
    body: dict[str, Any] | None = None
    params: dict[str, str] | None = None


def admin_key(data_dir: str) -> str:
    key = os.environ.get("COSTGATE_ADMIN_KEY")
    if key:
        return key
    path = admin_key_file(data_dir)
    try:
        return path.read_text().strip()
    except OSError:
        raise CommandFailed(
            f"no admin key: set COSTGATE_ADMIN_KEY, or run where the gateway's {path} is (--data-dir)", USAGE_EXIT
        ) from None


def table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    """Aligned columns with a header line; lists and None printed for a person."""

    def cell(value: Any) -> str:
        if value is None:
            return "-"
        if isinstance(value, list):
            return ",".join(str(v) for v in value) or "-"
        return str(value)

    cells = [list(columns)] + [[cell(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(line, widths)).rstrip() for line in cells)


def _team_call(args: argparse.Namespace) -> ApiCall:
    if args.action == "create":
        return ApiCall("POST", "/admin/teams", lambda r: f"team {r['name']} created: {r['id']}", {"name": args.name})
    return ApiCall("GET", "/admin/teams", lambda r: table(r["data"], ("id", "name")))


def _key_call(args: argparse.Namespace) -> ApiCall:
    if args.action == "create":
        body: dict[str, Any] = {"team": args.team, "plan": args.plan}
        for field, value in (("name", args.name), ("models", args.model), ("tags", args.tag)):
            if value:
                body[field] = value
        if args.expires_at:
            body["expires_at"] = _time(args.expires_at)
        return ApiCall("POST", "/admin/keys", _new_secret, body)
    if args.action == "list":
        columns = ("id", "team_id", "name", "prefix", "plan", "models", "revoked")
        params = {"team": args.team} if args.team else None
        return ApiCall("GET", "/admin/keys", lambda r: table(r["data"], columns), params=params)
    if args.action == "rotate":
        return ApiCall("POST", f"/admin/keys/{args.key_id}/rotate", _new_secret)
    return ApiCall("DELETE", f"/admin/keys/{args.key_id}", lambda r: f"key {r['id']} revoked")


def _time(text: str) -> str | float:
    """Unix seconds as a number, anything else (ISO 8601) as the API reads it."""
    try:
        return float(text)
    except ValueError:
        return text


def _new_secret(answer: dict[str, Any]) -> str:
    return f"key {answer['id']}: {answer['key']}\n(the secret is shown only now: keep it)"


def _budget_call(args: argparse.Namespace) -> ApiCall:
    if args.action == "set":
        body: dict[str, Any] = {"scope": args.scope, "id": args.id, "amount_usd": args.amount, "period": args.period}
        if args.alert_at is not None:
            body["alert_at"] = args.alert_at
        return ApiCall("PUT", "/admin/budgets", _budget_line, body)
    if args.action == "delete":
        return ApiCall("DELETE", f"/admin/budgets/{args.budget_id}", lambda r: f"budget {r['id']} deleted")
    columns = ("id", "scope", "subject", "team_name", "period", "amount_usd", "spent_usd", "reserved_usd")
    return ApiCall("GET", "/admin/budgets", lambda r: table(r["data"], columns + ("remaining_usd",)))


def _budget_line(b: dict[str, Any]) -> str:
    subject = b.get("team_name") or b["subject"]
    return (
        f"budget {b['id']}: {b['scope']} {subject}, ${b['amount_usd']} {b['period']} "
        f"(spent ${b['spent_usd']}, reserved ${b['reserved_usd']})"
    )


def _alert_list(text: str) -> list[float]:
    try:
        return [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: fractions separated by commas, like 0.5,0.8,1") from None


async def call_api(args: argparse.Namespace, transport: httpx.AsyncBaseTransport | None = None) -> str:
    """Send the command's request; what to print, or CommandFailed."""
    call: ApiCall = args.api_call(args)
    headers = {"authorization": f"Bearer {admin_key(args.data_dir)}"}
    async with httpx.AsyncClient(base_url=args.url, headers=headers, transport=transport, timeout=30) as client:
        try:
            answer = await client.request(call.method, call.path, json=call.body, params=call.params)
        except httpx.TransportError as err:
            raise CommandFailed(
                f"cannot reach the gateway at {args.url} ({type(err).__name__}): is `costgate serve` running?",
                USAGE_EXIT,
            ) from None
    try:
        data = answer.json()
    except ValueError:
        data = None
    if answer.status_code >= 400:
        message = data["error"]["message"] if isinstance(data, dict) and isinstance(data.get("error"), dict) else ""
        raise CommandFailed(f"{answer.status_code}: {message or answer.text[:200]}", REFUSED_EXIT)
    if not isinstance(data, dict):
        raise CommandFailed(f"{args.url} answered something that is not the admin API's JSON", REFUSED_EXIT)
    return json.dumps(data, indent=2) if args.json else call.show(data)


async def run_admin(args: argparse.Namespace, transport: httpx.AsyncBaseTransport | None = None) -> int:
    """Run one command: print its answer, or its failure on stderr. The exit code."""
    try:
        print(await call_api(args, transport))
    except CommandFailed as err:
        print(f"costgate {args.command}: {err}", file=sys.stderr)
        return err.exit_code
    return 0


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", default=os.environ.get("COSTGATE_URL", DEFAULT_URL), help="the gateway's address")
    parser.add_argument("--data-dir", default="./costgate-data", help="where the generated admin_key file is")
    parser.add_argument("--json", action="store_true", help="print the API's JSON")


Subcommands = argparse._SubParsersAction


def add_commands(commands: Subcommands) -> None:
    def group(name: str, help_text: str, api_call: Callable[[argparse.Namespace], ApiCall]) -> Subcommands:
        parser = commands.add_parser(name, help=help_text)
        actions = parser.add_subparsers(dest="action", required=True)
        parser.set_defaults(run=lambda args: asyncio.run(run_admin(args)), api_call=api_call)
        return actions

    def action(actions: Subcommands, name: str, help_text: str) -> argparse.ArgumentParser:
        parser = actions.add_parser(name, help=help_text)
        _common(parser)
        return parser

    teams = group("teams", "teams (admin API)", _team_call)
    action(teams, "create", "create a team").add_argument("name")
    action(teams, "list", "list the teams")

    keys = group("keys", "API keys (admin API)", _key_call)
    create = action(keys, "create", "issue a key for a team; the secret is printed once")
    create.add_argument("--team", required=True, help="the team's id or name")
    create.add_argument("--name")
    create.add_argument("--model", action="append", help="a model the key may use (repeat; default: all)")
    create.add_argument("--plan", choices=("free", "pro", "enterprise"), default="pro")
    create.add_argument("--tag", action="append", help="a chargeback tag on every request (repeat)")
    create.add_argument("--expires-at", help="ISO 8601 time or Unix seconds")
    action(keys, "list", "list keys (never their secrets)").add_argument("--team", help="only this team's")
    action(keys, "rotate", "a new secret for the same key id").add_argument("key_id")
    action(keys, "revoke", "revoke a key").add_argument("key_id")

    budgets = group("budgets", "budgets (admin API)", _budget_call)
    put = action(budgets, "set", "create or change a budget")
    put.add_argument("--scope", choices=("team", "key", "user", "tag"), required=True)
    put.add_argument("--id", required=True, help="a team's id or name, a key's id, a user or a tag")
    put.add_argument("--amount", required=True, help="dollars, as a decimal")
    put.add_argument("--period", choices=("daily", "weekly", "monthly", "total"), required=True)
    put.add_argument("--alert-at", type=_alert_list, help="alert thresholds, like 0.5,0.8,1")
    action(budgets, "list", "budgets with their spend and reservations this period")
    action(budgets, "delete", "delete a budget").add_argument("budget_id")
