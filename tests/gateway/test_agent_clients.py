"""Claude Code and Codex through the gateway (issue 29), replayed in-process from the request
bodies the pinned CLIs really sent (tests/fixtures/agents): the first turn, and the turn that
carries a tool's result with the thinking (Claude Code) or encrypted reasoning (Codex) of the
turn before.

- Native passthrough: to a model whose upstream serves the client's API (litellm's Anthropic
  provider, a `apis: [messages]` or `[responses]` deployment), the body arrives with every field
  the client sent, the gateway setting only the model name, and the client's anthropic-beta
  and anthropic-version; thinking blocks and signatures come back, and go up again, byte for
  byte.
- Translation that maps: to a Chat Completions upstream, thinking and effort become
  reasoning_effort, and what has no equivalent is dropped and named in
  x-costgate-dropped-params — never a 400.
- Money: each answer's ledger cost equals what the fake provider billed, cache reads and
  writes and reasoning tokens included.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.fakes.fake_agents import ENCRYPTED, REDACTED, SIGNATURE, AgentFake
from tests.gateway.agents_support import InProcessGateway, fake_provider, fixture


@pytest.fixture(scope="module")
def provider() -> Iterator[tuple[str, AgentFake]]:
    with fake_provider() as running:
        yield running


@pytest.fixture
async def gw(provider: tuple[str, AgentFake], tmp_path: Path) -> AsyncIterator[tuple[InProcessGateway, str]]:
    url, fake = provider
    fake.requests.clear()
    fake.cached_prefixes.clear()
    fake.bill.dollars, fake.bill.calls = Decimal(0), 0
    gateway = InProcessGateway(url, tmp_path)
    key = await gateway.start()
    yield gateway, key
    await gateway.stop()


def sse_events(raw: bytes) -> list[dict[str, Any]]:
    return [orjson.loads(line[6:]) for line in raw.split(b"\n") if line.startswith(b"data: ") and line[6:] != b"[DONE]"]


async def post_messages(gw: InProcessGateway, key: str, captured: dict[str, Any], model: str) -> Any:
    body = dict(captured["body"], model=model)
    headers = {"x-api-key": key, **captured["headers"]}
    return await gw.http.post("/v1/messages?beta=true", content=orjson.dumps(body), headers=headers)


def unscoped(body: dict[str, Any]) -> dict[str, Any]:
    """The body without the team's cache-scope text the gateway puts before a system prompt
    that carries cache breakpoints (gateway/upstream/prompt_markers.py, issue 26)."""
    system = body.get("system")
    if isinstance(system, list) and system and system[0].get("text", "").startswith("cache scope "):
        return dict(body, system=system[1:])
    return body


def message_of(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The content blocks a Messages stream builds, as the anthropic SDK accumulates them."""
    blocks: list[dict[str, Any]] = []
    for event in events:
        if event["type"] == "content_block_start":
            blocks.append(dict(event["content_block"]))
        elif event["type"] == "content_block_delta":
            delta, block = event["delta"], blocks[event["index"]]
            for kind, key in (("thinking_delta", "thinking"), ("signature_delta", "signature"), ("text_delta", "text")):
                if delta["type"] == kind:
                    block[key] = block.get(key, "") + delta[key]
            if delta["type"] == "input_json_delta":
                block["partial"] = block.get("partial", "") + delta["partial_json"]
    return blocks


@pytest.mark.parametrize("model", ["claude-opus-5-5", "native-claude"])
@pytest.mark.slow  # takes seconds in process: out of the fast lane
async def test_claude_code_turns_pass_through_natively(
    gw: tuple[InProcessGateway, str], provider: tuple[str, AgentFake], model: str
) -> None:
    gateway, key = gw
    _, fake = provider
    first = fixture("claude_code_turn1")
    response = await post_messages(gateway, key, first, model)
    assert response.status_code == 200, response.text
    blocks = message_of(sse_events(response.content))
    assert [b["type"] for b in blocks] == ["thinking", "redacted_thinking", "tool_use"]
    assert blocks[0]["signature"] == SIGNATURE and blocks[1]["data"] == REDACTED
    sent = fake.requests[-1]
    # every field the client sent arrives as it was sent; only the model name is the gateway's.
    # litellm reads `metadata` as its own keyword argument (and its passthrough has no place for
    # Anthropic's): dropped there, and named.
    own = {"model"} | ({"metadata"} if model == "claude-opus-5-5" else set())
    assert {k: v for k, v in unscoped(sent["body"]).items() if k not in own} == {
        k: v for k, v in first["body"].items() if k not in own
    }
    assert set(sent["headers"]["anthropic-beta"].split(",")) == set(first["headers"]["anthropic-beta"].split(","))
    assert sent["headers"]["x-api-key"] == "sk-ant-provider-key"
    assert response.headers.get("x-costgate-dropped-params") == ("metadata" if model == "claude-opus-5-5" else None)

    second = fixture("claude_code_turn2")  # the tool's result, after thinking + tool_use
    response = await post_messages(gateway, key, second, model)
    assert response.status_code == 200, response.text
    resent = fake.requests[-1]["body"]["messages"]
    assert orjson.dumps(resent) == orjson.dumps(second["body"]["messages"])  # thinking and signatures, byte for byte
    assert message_of(sse_events(response.content))[-1]["text"].startswith("done: ")
    assert Decimal(await gateway.spend_usd()) == fake.bill.dollars > 0


@pytest.mark.parametrize("model", ["claude-opus-5-5", "native-claude"])
async def test_a_server_tool_billed_per_use_never_reaches_a_native_upstream(
    gw: tuple[InProcessGateway, str], provider: tuple[str, AgentFake], model: str
) -> None:
    """Claude Code with its web search on: Anthropic bills $10 per 1,000 searches apart from the
    tokens, which the gateway could neither hold nor charge. The provider must not be offered it."""
    gateway, key = gw
    _, fake = provider
    turn = copy.deepcopy(fixture("claude_code_turn1"))
    search = {"type": "web_search_20250305", "name": "web_search", "max_uses": 8}
    turn["body"]["tools"].append(search)
    response = await post_messages(gateway, key, turn, model)
    assert response.status_code == 200, response.text
    sent = fake.requests[-1]["body"]
    assert [t.get("name") for t in sent["tools"]] == [t.get("name") for t in turn["body"]["tools"][:-1]]
    assert "web_search" not in orjson.dumps(sent["tools"]).decode()
    dropped = set(response.headers["x-costgate-dropped-params"].split(","))
    assert "tools%5B%5D.web_search_20250305" in dropped
    assert Decimal(await gateway.spend_usd()) == fake.bill.dollars > 0


async def test_claude_code_on_a_chat_upstream_is_mapped_not_refused(
    gw: tuple[InProcessGateway, str], provider: tuple[str, AgentFake]
) -> None:
    gateway, key = gw
    _, fake = provider
    for turn in ("claude_code_turn1", "claude_code_turn2"):
        response = await post_messages(gateway, key, fixture(turn), "chat-claude")
        assert response.status_code == 200, response.text
        chat = fake.requests[-1]["body"]
        assert fake.requests[-1]["path"] == "/v1/chat/completions"
        assert chat["reasoning_effort"] == "medium"  # output_config.effort
        dropped = response.headers["x-costgate-dropped-params"].split(",")
        assert {"context_management", "tools%5B%5D.defer_loading"} <= set(dropped)
    assert "messages%5B%5D.content%5B%5D.thinking" in dropped  # the second turn's history
    assert [m["role"] for m in chat["messages"]][-2:] == ["assistant", "tool"]
    assert Decimal(await gateway.spend_usd()) == fake.bill.dollars > 0


@pytest.mark.parametrize("model", ["gpt-5.5-codex", "native-codex"])
async def test_codex_turns_are_answered(
    gw: tuple[InProcessGateway, str], provider: tuple[str, AgentFake], model: str
) -> None:
    gateway, key = gw
    _, fake = provider
    headers = {"authorization": f"Bearer {key}"}
    first = fixture("codex_turn1")
    response = await gateway.http.post("/v1/responses", json=dict(first["body"], model=model), headers=headers)
    assert response.status_code == 200, response.text
    events = sse_events(response.content)
    done = [e for e in events if e["type"] == "response.completed"][0]["response"]
    sent = fake.requests[-1]
    if model == "native-codex":
        assert sent["path"] == "/v1/responses"
        assert {k: v for k, v in sent["body"].items() if k not in ("model", "tools")} == {
            k: v for k, v in first["body"].items() if k not in ("model", "tools")
        }
        # but web search, which the provider bills per call apart from the tokens (no usage the
        # gateway prices counts it, no hold bounds it): left out, and named
        assert sent["body"]["tools"] == [t for t in first["body"]["tools"] if t["type"] != "web_search"]
        assert response.headers["x-costgate-dropped-params"] == "tools%5B%5D.web_search"
        assert done["output"][0]["encrypted_content"] == ENCRYPTED
    else:
        assert sent["path"] == "/v1/chat/completions"
        assert sent["body"]["reasoning_effort"] == "medium" and sent["body"]["verbosity"] == "low"
        assert sent["body"]["prompt_cache_key"] == first["body"]["prompt_cache_key"]
        dropped = set(response.headers["x-costgate-dropped-params"].split(","))
        assert {"client_metadata", "include", "tools%5B%5D.custom", "tools%5B%5D.web_search"} <= dropped
    second = copy.deepcopy(fixture("codex_turn2"))
    response = await gateway.http.post("/v1/responses", json=dict(second["body"], model=model), headers=headers)
    assert response.status_code == 200, response.text
    if model == "native-codex":
        resent = fake.requests[-1]["body"]["input"]
        assert orjson.dumps(resent) == orjson.dumps(second["body"]["input"])  # encrypted reasoning as sent
    else:
        assert fake.requests[-1]["body"]["messages"][-1]["role"] == "tool"
    assert Decimal(await gateway.spend_usd()) == fake.bill.dollars > 0


async def test_count_tokens_takes_what_claude_code_sends(gw: tuple[InProcessGateway, str]) -> None:
    gateway, key = gw
    captured = fixture("claude_code_turn2")
    body = {k: v for k, v in captured["body"].items() if k not in ("max_tokens", "stream", "metadata")}
    response = await gateway.http.post(
        "/v1/messages/count_tokens?beta=true", json=body, headers={"x-api-key": key, **captured["headers"]}
    )
    assert response.status_code == 200, response.text
    assert response.json()["input_tokens"] > 1000


async def test_mcp_servers_stay_refused(gw: tuple[InProcessGateway, str], provider: tuple[str, AgentFake]) -> None:
    """Fields that name hosts or credentials are refused on the native path too (issue 16)."""
    gateway, key = gw
    _, fake = provider
    body = dict(fixture("claude_code_turn1")["body"], model="native-claude")
    body["mcp_servers"] = [
        {"type": "url", "url": "https://attacker.example/mcp", "name": "x", "authorization_token": "t"}
    ]
    response = await gateway.http.post("/v1/messages", json=body, headers={"x-api-key": key})
    assert response.status_code == 400 and "mcp_servers" in response.text
    assert fake.requests == []
