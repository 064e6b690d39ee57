"""`costgate distill export --cascade NAME --out FILE`: a cascade's last-tier answers as OpenAI
chat fine-tuning JSONL (issue 13, item 6), to train a student that becomes its new first tier.

Reads the text the gateway kept in the config's database (gateway/storage/distill_texts.py:
escalations and shadow samples of the teams with `keep_text: true`; a team that no longer has
it is left out, and so is an answer the team reported wrong), deduplicates it by normalized
prompt and splits it by a hash of the prompt (policies/distill.py): FILE gets the training
examples, FILE with `.holdout.jsonl` for its `.jsonl` (or appended) the held-back ones,
`--holdout` of them (0: none, no second file). Both files hold teams' text: they are created
readable by their owner only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from gateway.commands.command_config import read_config
from gateway.config.settings import Settings
from gateway.storage.db import create_engine
from gateway.storage.distill_texts import KeptText, TextStore
from gateway.storage.private import private_file
from gateway.storage.verdict_store import FeedbackStore
from policies.distill import Example, StoredText, build_export, fine_tuning_problem

OPENAI_MIN_EXAMPLES = 10  # OpenAI's fine-tuning refuses a training file with fewer


def holdout_path(out: Path) -> Path:
    stem = out.name[: -len(".jsonl")] if out.name.endswith(".jsonl") else out.name
    return out.with_name(stem + ".holdout.jsonl")


async def read_rows(settings: Settings, cascade: str, teams: frozenset[str]) -> list[KeptText]:
    engine = create_engine(settings.database_url)
    try:
        store = TextStore(engine)
        await store.create()
        await FeedbackStore(engine).create()  # answers reported wrong are left out
        return await store.rows(cascade, teams)
    finally:
        await engine.dispose()


def write_jsonl(path: Path, examples: list[Example]) -> None:
    private_file(path)
    with path.open("w") as f:
        for example in examples:
            line = example.line()
            problem = fine_tuning_problem(line)
            assert problem is None, f"an example that is not a fine-tuning example: {problem}"
            f.write(json.dumps(line, ensure_ascii=False) + "\n")


def run_export(args: argparse.Namespace) -> int:
    if not 0.0 <= args.holdout < 1.0:
        print(f"costgate distill: --holdout {args.holdout}: must be at least 0 and below 1", file=sys.stderr)
        return 2
    settings = read_config("distill", args.config)
    if settings is None:
        return 2
    configured = {c.name for c in settings.cascades}
    teams = settings.keep_text_teams()
    if args.team:
        teams = teams & frozenset(args.team)
    if not teams:
        which = f"of {', '.join(args.team)} " if args.team else ""
        print(
            f"costgate distill: no team {which}keeps its text: nothing to export "
            "(a team opts in with `teams: {NAME: {keep_text: true}}` in the config)",
            file=sys.stderr,
        )
        return 1
    rows = asyncio.run(read_rows(settings, args.cascade, teams))
    if not rows:
        why = "" if args.cascade in configured else f" (the config has no cascade {args.cascade!r})"
        print(
            f"costgate distill: no kept text for cascade {args.cascade!r} from teams {', '.join(sorted(teams))}"
            f"{why}: nothing exported",
            file=sys.stderr,
        )
        return 1
    export = build_export((StoredText(r.messages, r.answer) for r in rows), args.holdout)
    if not export.train and not export.held_back:
        print(
            f"costgate distill: none of the {export.rows} kept requests of cascade {args.cascade!r} can be written "
            "as a chat fine-tuning example (tool calls, images or empty answers): nothing exported",
            file=sys.stderr,
        )
        return 1
    out = Path(args.out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)  # as `cache calibrate --out` does
        write_jsonl(out, export.train)
    except OSError as err:
        print(f"costgate distill: cannot write {out}: {err.strerror or err}", file=sys.stderr)
        return 2
    shadows = sum(r.source == "shadow" for r in rows)
    print(
        f"read {export.rows} kept requests of cascade {args.cascade!r} ({export.rows - shadows} escalations, "
        f"{shadows} shadow samples; teams {', '.join(sorted({r.team_name for r in rows}))}): "
        f"{export.duplicates} duplicates, {export.skipped} not writable as chat examples"
    )
    print(f"wrote {len(export.train)} training examples to {out}")
    if args.holdout > 0:
        held = holdout_path(out)
        try:
            write_jsonl(held, export.held_back)
        except OSError as err:
            print(f"costgate distill: cannot write {held}: {err.strerror or err}", file=sys.stderr)
            return 2
        print(f"wrote {len(export.held_back)} held-back examples to {held}")
    if len(export.train) < OPENAI_MIN_EXAMPLES:
        print(
            f"costgate distill: {len(export.train)} training examples: OpenAI's fine-tuning needs at least "
            f"{OPENAI_MIN_EXAMPLES}",
            file=sys.stderr,
        )
    return 0


def add_commands(commands: argparse._SubParsersAction) -> None:
    distill = commands.add_parser("distill", help="distillation tools")
    sub = distill.add_subparsers(dest="distill_command", required=True)
    export = sub.add_parser("export", help="a cascade's last-tier answers as OpenAI fine-tuning JSONL")
    export.add_argument("--cascade", required=True, help="the cascade whose answers to export")
    export.add_argument("--out", required=True, help="the training file (JSONL); held-back: FILE.holdout.jsonl")
    export.add_argument("--config", help="the gateway's config (its database_url and teams)")
    export.add_argument("--holdout", type=float, default=0.1, help="the share of prompts held back (0: none)")
    export.add_argument("--team", action="append", help="only this team's text (repeatable; it must keep text)")
    export.set_defaults(run=run_export)
