"""The pinned coding-agent CLIs themselves against the gateway and the fake provider (issue 29):
`claude -p` (Claude Code 2.1.332) on a litellm Anthropic model and on a native Messages model,
`codex exec` (Codex 0.171.0) through the Responses API on a Chat Completions upstream and on a
native Responses one. Each run is a multi-turn agent loop: the fake asks for the CLI's shell
tool, the CLI runs it and sends the result back, the fake answers "done: <result>". Then the
gateway's ledger must equal the fake provider's bill.

The CLIs are npm packages (Claude Code's is a 400 MB native binary), not installed by .ci/run:
this test runs where they are installed under COSTGATE_AGENT_CLIS (default
~/.cache/costgate/agent-clis), and is skipped with the command that installs them otherwise.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import httpx
import pytest

from tests.fakes.fake_agents import TOOL_MARKER
from tests.gateway.agents_support import models
from tests.support import FakeUpstream, GatewayProcess, wait_until

pytestmark = pytest.mark.slow

CLI_DIR = Path(os.environ.get("COSTGATE_AGENT_CLIS", Path.home() / ".cache" / "costgate" / "agent-clis"))
CLAUDE, CODEX = CLI_DIR / "node_modules" / ".bin" / "claude", CLI_DIR / "node_modules" / ".bin" / "codex"
INSTALL = (
    f"npm install --prefix {CLI_DIR} @anthropic-ai/claude-code@2.1.332 @openai/codex@0.171.0 && "
    f"node {CLI_DIR}/node_modules/@anthropic-ai/claude-code/install.cjs"
)
ASK_TOOL = "Use your shell tool to run the costgate-tool marker command."


def installed(binary: Path) -> bool:
    if not binary.exists():
        return False
    try:
        return subprocess.run([binary, "--version"], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GatewayProcess, str]]:
    work = tmp_path_factory.mktemp("agent-clis")
    fake = FakeUpstream(work, "tests.fakes.fake_agents")
    gateway = GatewayProcess({"models": models(f"http://127.0.0.1:{fake.port}")}, work / "gw")
    yield gateway, f"http://127.0.0.1:{fake.port}"
    gateway.stop()
    fake.stop()


def run_cli(argv: list[str], env: dict[str, str], home: Path) -> str:
    home.mkdir(parents=True, exist_ok=True)
    (home / ".codex").mkdir(exist_ok=True)
    base = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "TERM")}
    done = subprocess.run(
        argv,
        env={**base, "HOME": str(home), "CODEX_HOME": str(home / ".codex"), **env},
        cwd=home,
        capture_output=True,
        text=True,
        timeout=240,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def ledger_equals_bill(gateway: GatewayProcess, fake_url: str) -> None:
    billed = Decimal(httpx.get(f"{fake_url}/_bill").json()["usd"])
    assert billed > 0
    wait_until(lambda: Decimal(gateway.spend()["total_usd"]) == billed, timeout=30, what="ledger == bill")


@pytest.mark.skipif(not installed(CLAUDE), reason=f"Claude Code 2.1.332 is not installed; run: {INSTALL}")
@pytest.mark.parametrize("model", ["claude-opus-5-5", "native-claude"])
def test_claude_code_runs_a_tool_loop_through_the_gateway(
    stack: tuple[GatewayProcess, str], tmp_path: Path, model: str
) -> None:
    gateway, fake_url = stack
    env = {
        "ANTHROPIC_BASE_URL": gateway.url,
        "ANTHROPIC_API_KEY": gateway.new_key(f"claude-{model}"),
        "DISABLE_TELEMETRY": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
    out = run_cli([str(CLAUDE), "-p", ASK_TOOL, "--model", model, "--allowedTools", "Bash"], env, tmp_path)
    assert f"done: {TOOL_MARKER}" in out
    ledger_equals_bill(gateway, fake_url)


@pytest.mark.skipif(not installed(CODEX), reason=f"Codex 0.171.0 is not installed; run: {INSTALL}")
@pytest.mark.parametrize("model", ["gpt-5.5-codex", "native-codex"])
def test_codex_runs_a_tool_loop_through_the_gateway(
    stack: tuple[GatewayProcess, str], tmp_path: Path, model: str
) -> None:
    gateway, fake_url = stack
    provider = [
        "-c",
        "model_provider=costgate",
        "-c",
        "model_providers.costgate.name=costgate",
        "-c",
        f"model_providers.costgate.base_url={gateway.url}/v1",
        "-c",
        'model_providers.costgate.wire_api="responses"',
        "-c",
        "model_providers.costgate.env_key=COSTGATE_KEY",
    ]
    argv = [str(CODEX), "exec", "--skip-git-repo-check", "-s", "danger-full-access", *provider, "-m", model, ASK_TOOL]
    out = run_cli(argv, {"COSTGATE_KEY": gateway.new_key(f"codex-{model}")}, tmp_path)
    assert out.startswith("done: ") and TOOL_MARKER in out  # the fake's answer quotes the tool's output
    ledger_equals_bill(gateway, fake_url)
