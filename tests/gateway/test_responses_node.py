"""The official openai Node SDK (the version in tests/gateway/node/package.json) as a client of
the Responses API, through an upstream that speaks only Chat Completions and one that serves the
Responses API itself: whole and streamed, with a tool and previous_response_id, priced.

The SDK is installed with npm into tests/gateway/node/node_modules on first use (Node 20 is on
the machine); the test is skipped, saying why, only when node or npm is missing or npm cannot
install it."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest

from tests.support import FakeUpstream, GatewayProcess, model

pytestmark = pytest.mark.slow  # boots processes: not in the fast lane

NODE_DIR = Path(__file__).parent / "node"
PRICE_IN, PRICE_OUT = Decimal("0.15") / 10**6, Decimal("0.6") / 10**6


@pytest.fixture(scope="module")
def node_sdk() -> Path:
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("node and npm are needed to run the openai Node SDK")
    if not (NODE_DIR / "node_modules" / "openai" / "package.json").exists():
        done = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=NODE_DIR,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode != 0:
            pytest.skip(f"npm could not install the openai Node SDK: {done.stderr.strip()[-500:]}")
    return Path(node)


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream) -> Iterator[GatewayProcess]:
    models = [
        model("small", "echo-small", fake_upstream.url, "0.15", "0.6"),
        model("native", "echo-native", fake_upstream.url, "0.15", "0.6", apis=["chat", "responses"]),
    ]
    gateway = GatewayProcess({"models": models}, tmp_path_factory.mktemp("node"))
    yield gateway
    gateway.stop()


def cost(usage: dict) -> Decimal:
    return usage["input_tokens"] * PRICE_IN + usage["output_tokens"] * PRICE_OUT


@pytest.mark.parametrize("name", ["small", "native"])
def test_the_node_sdk_speaks_the_responses_api(
    node_sdk: Path, gw: GatewayProcess, fake_upstream: FakeUpstream, name: str
) -> None:
    before = fake_upstream.stats().get("responses:echo-native", 0)
    env = {
        "PATH": str(node_sdk.parent),
        "COSTGATE_URL": gw.url + "/v1",
        "COSTGATE_KEY": gw.new_key("team-node"),
        "COSTGATE_MODEL": name,
    }
    run = subprocess.run(
        [str(node_sdk), "responses.mjs"], cwd=NODE_DIR, env=env, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    seen = json.loads(run.stdout)
    whole, stream = seen["whole"], seen["stream"]
    assert whole["text"] == "echo: hello from node" and whole["cache"] == "miss"
    assert Decimal(whole["cost"]) == cost(whole["usage"]) > 0
    assert stream["text"] == "echo: stream from node"
    assert stream["kinds"][0] == "response.created" and stream["kinds"][-1] == "response.completed"
    assert Decimal(stream["usage"]["cost_usd"]) == cost(stream["usage"]) > 0
    for tools in (seen["tools"], seen["streamedTools"]):
        assert (tools["type"], tools["name"], tools["args"]) == (
            "function_call",
            "get_weather",
            {"q": "Weather in Oslo?"},
        )
        assert tools["text"] == "echo: tool said snowy" and tools["previous"] == tools["first"]
    # six requests, five upstream calls: the streamed round trip's second request carries the same
    # conversation as the whole one's (same call id and output), so the exact cache answers it
    assert fake_upstream.stats().get("responses:echo-native", 0) - before == (5 if name == "native" else 0)
