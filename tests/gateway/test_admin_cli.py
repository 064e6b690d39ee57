"""`costgate teams | keys | budgets` (gateway/commands/admin_cli.py, issue 28 item 8) against the gateway's
real admin API, in-process: the commands a person types, what they print, and what the keys they
make can then do."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from gateway.app import create_app
from gateway.cli import build_parser
from gateway.commands.admin_cli import run_admin
from gateway.config.models_config import ModelConfig
from gateway.config.settings import Settings
from tests.support import free_port

ADMIN = "sk-cg-admin-cli-test"


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[FastAPI]:
    settings = Settings(
        admin_key=ADMIN,
        database_url=f"sqlite:///{tmp_path}/db.sqlite",
        data_dir=str(tmp_path / "data"),
        models=[ModelConfig(name="small", provider="openai", model="gpt-4o-mini", api_base="http://127.0.0.1:9/v1")],
    )
    application = create_app(settings)
    await application.state.gateway.start()
    yield application
    await application.state.gateway.stop()


class Terminal:
    """Runs `costgate ARGS` against the app and keeps what it printed."""

    def __init__(self, app: FastAPI, capsys: pytest.CaptureFixture[str]) -> None:
        self.transport = httpx.ASGITransport(app=app)
        self.capsys = capsys

    async def run(self, *argv: str) -> tuple[int, str, str]:
        args = build_parser().parse_args([*argv[:2], "--url", "http://gw.test", *argv[2:]])
        code = await run_admin(args, self.transport)
        out, err = self.capsys.readouterr()
        return code, out, err

    async def status_with(self, key: str) -> int:
        async with httpx.AsyncClient(transport=self.transport, base_url="http://gw.test") as client:
            return (await client.get("/v1/models", headers={"authorization": f"Bearer {key}"})).status_code


@pytest.fixture
def terminal(app: FastAPI, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Terminal:
    monkeypatch.setenv("COSTGATE_ADMIN_KEY", ADMIN)
    return Terminal(app, capsys)


def secret(out: str) -> tuple[str, str]:
    found = re.search(r"key (key_\S+): (sk-cg-\S+)", out)
    assert found, out
    return found[1], found[2]


async def test_teams_and_keys_from_a_terminal(terminal: Terminal) -> None:
    code, out, _ = await terminal.run("teams", "create", "search")
    assert code == 0 and out.startswith("team search created: ")
    code, out, _ = await terminal.run("teams", "list")
    assert code == 0 and out.splitlines()[0].split() == ["id", "name"] and " search" in out.splitlines()[1]

    code, out, _ = await terminal.run("keys", "create", "--team", "search", "--name", "api", "--model", "small")
    assert code == 0 and "shown only now" in out
    key_id, first = secret(out)
    assert await terminal.status_with(first) == 200

    code, out, _ = await terminal.run("keys", "list", "--team", "search")
    assert code == 0 and key_id in out and "small" in out and first not in out  # never the secret

    code, out, _ = await terminal.run("keys", "rotate", key_id)
    assert code == 0
    same_id, second = secret(out)
    assert same_id == key_id and second != first
    assert await terminal.status_with(first) == 401 and await terminal.status_with(second) == 200

    code, out, _ = await terminal.run("keys", "revoke", key_id)
    assert code == 0 and out.strip() == f"key {key_id} revoked"
    assert await terminal.status_with(second) == 401


async def test_budgets_from_a_terminal(terminal: Terminal) -> None:
    await terminal.run("teams", "create", "search")
    code, out, _ = await terminal.run(
        "budgets", "set", "--scope", "team", "--id", "search", "--amount", "400", "--period", "monthly",
        "--alert-at", "0.5,1",
    )  # fmt: skip
    assert code == 0 and "team search, $400" in out and "monthly" in out
    budget_id = out.split()[1].rstrip(":")
    code, out, _ = await terminal.run("budgets", "list", "--json")
    listed = json.loads(out)["data"]
    assert code == 0 and [(b["id"], b["alert_at"]) for b in listed] == [(budget_id, [0.5, 1.0])]
    code, out, _ = await terminal.run("budgets", "delete", budget_id)
    assert code == 0 and "deleted" in out
    code, out, _ = await terminal.run("budgets", "list")
    assert code == 0 and out.strip().split()[0] == "id" and len(out.strip().splitlines()) == 1


async def test_a_refusal_prints_the_apis_message_and_exits_1(terminal: Terminal) -> None:
    code, out, err = await terminal.run("keys", "create", "--team", "no-such-team")
    assert code == 1 and out == "" and re.match(r"costgate keys: 404: .*no-such-team", err), err
    code, _, err = await terminal.run("budgets", "set", "--scope", "team", "--id", "x", "--amount", "-1",
                                      "--period", "daily")  # fmt: skip
    assert code == 1 and "costgate budgets: " in err


async def test_the_admin_key_comes_from_the_environment_or_the_generated_file(
    app: FastAPI, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    terminal = Terminal(app, capsys)
    monkeypatch.setenv("COSTGATE_ADMIN_KEY", "sk-cg-admin-wrong")
    code, _, err = await terminal.run("teams", "list")
    assert code == 1 and "401" in err
    monkeypatch.delenv("COSTGATE_ADMIN_KEY")
    code, _, err = await terminal.run("teams", "list", "--data-dir", str(tmp_path / "nowhere"))
    assert code == 2 and "no admin key" in err
    (tmp_path / "gw-data").mkdir()
    (tmp_path / "gw-data" / "admin_key").write_text(ADMIN + "\n")
    code, out, _ = await terminal.run("teams", "list", "--data-dir", str(tmp_path / "gw-data"))
    assert code == 0 and out.startswith("id")


async def test_an_unreachable_gateway_is_said_in_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COSTGATE_ADMIN_KEY", ADMIN)
    args = build_parser().parse_args(["teams", "list", "--url", f"http://127.0.0.1:{free_port()}"])
    assert await run_admin(args) == 2
    err = capsys.readouterr().err
    assert "cannot reach the gateway" in err and "costgate serve" in err and len(err.strip().splitlines()) == 1
