"""The `costgate` command."""

from __future__ import annotations

import argparse
import gc
import logging
import os
import socket
import sys
from pathlib import Path

import yaml
from pydantic import ValidationError

from engine import engine_cli
from gateway.commands import admin_cli, cascade_cli, db_cli, distill_cli, reconcile_cli, whatif_cli
from gateway.commands.cache_cli import team_labels
from gateway.edge.access_log import configure_logging
from policies.semantic_cache.calibrate_cli import add_cache_commands

CONFIG_ERROR_EXIT = 2  # like argparse's usage errors: the command was given something it cannot use
SAMPLE_CONFIG = "costgate.example.yaml"


def config_error(path: str | None, err: Exception) -> str:
    """One line that says what is wrong with the config, for a person (not a traceback)."""
    where = f"config {path}" if path else "config"
    if isinstance(err, FileNotFoundError) and path and not Path(path).exists():
        return f"{where}: no such file (copy {SAMPLE_CONFIG} from the repository, or run without --config)"
    if isinstance(err, OSError):
        return f"{where}: {err.filename or path}: {err.strerror or err}"
    if isinstance(err, yaml.MarkedYAMLError) and err.problem_mark is not None:
        mark = err.problem_mark
        return f"{where}: not valid YAML at line {mark.line + 1}, column {mark.column + 1}: {err.problem}"
    if isinstance(err, yaml.YAMLError):
        return f"{where}: not valid YAML: {' '.join(str(err).split())}"
    if isinstance(err, ValidationError):
        problems = err.errors()
        first = problems[0]
        field = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first["loc"]).lstrip(".")
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        return f"{where}: {field or 'top level'}: {first['msg']}{more}"
    return f"{where}: {' '.join(str(err).split())}"


def _listen_error(host: str, port: int) -> str | None:
    """Why nothing could listen on host:port (say, the port is taken); None if it can."""
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET  # "::" and the like are IPv6
        with socket.create_server((host, port), family=family):
            return None
    except OSError as err:
        return f"cannot listen on {host}:{port}: {os.strerror(err.errno) if err.errno else err}"


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from gateway.app import create_app
    from gateway.config.settings import load_settings
    from gateway.edge.http_protocol import with_header_timeout

    try:
        settings = load_settings(args.config)
        configure_logging(args.log_level, (args.log_format or settings.log_format) == "json")
        # A taken port is said before the app writes its admin key and database.
        busy = _listen_error(args.host, args.port)
        # Building the app checks what the schema cannot (fallbacks that exist, engine blocks,
        # a local model's context length): those raise ValueError as config errors too.
        app = None if busy else create_app(settings)
    except (OSError, yaml.YAMLError, ValueError) as err:
        print(f"costgate: {config_error(args.config, err)}", file=sys.stderr)
        return CONFIG_ERROR_EXIT
    if app is None:
        print(f"costgate: {busy}", file=sys.stderr)
        return CONFIG_ERROR_EXIT
    if not settings.models:
        logging.getLogger("costgate").warning(
            "no models configured: set OPENAI_API_KEY / ANTHROPIC_API_KEY or pass --config"
        )
    # Everything built so far (imports, the price map, the app) lives as long as the process:
    # move it out of the collector's reach, so a full collection scans only what requests
    # allocate (without this, each full collection walked ~160k start-up objects: ~0.1 s pauses).
    gc.collect()
    gc.freeze()
    http = with_header_timeout(settings.header_timeout_s)  # httptools, plus a deadline for headers
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        loop="uvloop",
        http=http,
        access_log=False,  # costgate's own access log has one line a request (gateway/edge/access_log.py)
        log_config=None,  # uvicorn's lines go through the handler configure_logging set (text or JSON)
        log_level=args.log_level,
        timeout_graceful_shutdown=10,
    )
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="costgate", description="A cost-optimizing LLM gateway")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the gateway")
    serve.add_argument("--config", help="YAML config file (default: embedded defaults)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=4000)
    serve.add_argument(
        "--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"], type=str.lower
    )
    serve.add_argument(
        "--log-format", choices=["text", "json"], help="log lines as text or JSON (default: the config's log_format)"
    )
    serve.set_defaults(run=_serve)
    cascade_cli.add_commands(commands)  # `costgate cascade train` (issue 5)
    distill_cli.add_commands(commands)  # `costgate distill export` (issue 13)
    whatif_cli.add_commands(commands)  # `costgate whatif FILE` (issue 27)
    add_cache_commands(commands, team_labels)  # `costgate cache calibrate FILE | --team NAME` (issues 4, 12)
    engine_cli.add_commands(commands)  # `costgate engine quantize SRC DST` (issue 6)
    db_cli.add_commands(commands)  # `costgate db upgrade | current` (issue 28)
    admin_cli.add_commands(commands)  # `costgate teams | keys | budgets ...`: the admin API (issue 28)
    reconcile_cli.add_commands(commands)  # `costgate reconcile --provider P --month M` (issue 26)
    return parser


def main(argv: list[str] | None = None) -> int:
    # The one-shot commands print what they did and log only warnings (a migration a command
    # runs on its way is not news to its user, and a mistake stays one line); `serve` sets its
    # own level. httpx logs every upstream request at INFO: configure_logging shows those only at
    # debug.
    configure_logging("warning", json_lines=False)
    logging.getLogger("alembic").setLevel(logging.WARNING)  # migrate.py says what changed, in one line
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
