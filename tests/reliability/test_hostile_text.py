"""Issue 24, items 1 and 2: text that tokenizers choke on (a million tabs, spaces, \\x0b, \\x0c…;
tiktoken's o200k pattern gave up on such a run with a Rust panic) gets an answer, and the ledger
still equals what the provider billed, on every endpoint, streamed and not; nothing stays held.

In process: the gateway app is driven over httpx's ASGI transport; the provider is
tests/fakes/fake_bytes.py on a thread (real HTTP, so litellm's Anthropic provider reaches it
too), billing every UTF-8 byte of the prompt as a token, as the worst byte-level tokenizer would.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from fastapi import FastAPI

from gateway.app import create_app
from gateway.config.settings import Settings
from gateway.service import Gateway
from tests.fakes.fake_bytes import BytesUpstream

ADMIN = "sk-cg-admin-hostile-text"
IN, OUT = Decimal("2.5"), Decimal("10")  # $ per million tokens, every model here
RUN = 1_000_000  # past tiktoken's backtracking limit in one run
TAB_RUN = "\t" * RUN
BUDGET = "100"


@pytest.fixture(scope="module")
def upstream() -> Iterator[BytesUpstream]:
    fake = BytesUpstream()
    yield fake
    fake.stop()


def models(api_base: str, root: str) -> list[dict[str, Any]]:
    price = {"input_per_mtok": str(IN), "output_per_mtok": str(OUT)}
    openai = {"provider": "openai", "api_base": api_base, "api_key": "fake", "price": price}
    return [
        {"name": "gpt", "model": "gpt-4o-mini", **openai},
        {"name": "native", "model": "gpt-4o", **openai, "apis": ["chat", "responses", "messages"]},
        {"name": "custom", "model": "my-llama", **openai},  # an OpenAI-compatible host, its own tokenizer
        {"name": "silent", "model": "my-llama-silent", **openai},  # the same, reporting no usage
        {"name": "claude", "provider": "litellm", "model": "anthropic/claude-haiku-4-5", "api_base": root,
         "api_key": "fake", "price": price},
    ]  # fmt: skip


@pytest.fixture(scope="module")
async def gateway(tmp_path_factory: pytest.TempPathFactory, upstream: BytesUpstream) -> AsyncIterator[FastAPI]:
    work: Path = tmp_path_factory.mktemp("hostile-text")
    settings = Settings.model_validate(
        {
            "admin_key": ADMIN,
            "database_url": f"sqlite:///{work}/db.sqlite",
            "data_dir": str(work / "data"),
            "max_body_bytes": 8 * 1024 * 1024,  # room for a million \x0b, each "\u000b" in JSON
            "models": models(upstream.url, upstream.root),
            "cache": {"exact": {"enabled": False}},  # every request reaches the provider
            "plans": {"enterprise": {"requests_per_minute": 3}},  # the count_tokens limit test's keys
        }
    )
    app = create_app(settings)
    gw: Gateway = app.state.gateway
    await gw.start()
    yield app
    await gw.stop()


def http(app: FastAPI, key: str | None = None) -> httpx.AsyncClient:
    headers = {"authorization": f"Bearer {key or ADMIN}"}
    transport = httpx.ASGITransport(app=app)
    return httpx.AsyncClient(transport=transport, base_url="http://gw.test", headers=headers, timeout=120)


class Team:
    """A fresh team with a budget, and the admin's view of what it spent and holds."""

    def __init__(self, gw: FastAPI, key: str, team_id: str) -> None:
        self.gw, self.key, self.id = gw, key, team_id

    @classmethod
    async def create(cls, gw: FastAPI, name: str, amount: str = BUDGET) -> Team:
        team = await gw.state.gateway.keys.create_team(name)
        _, key = await gw.state.gateway.keys.create_key(name)
        async with http(gw) as admin:
            put = await admin.put(
                "/admin/budgets", json={"scope": "team", "id": name, "amount_usd": amount, "period": "total"}
            )
            assert put.status_code == 200, put.text
        return cls(gw, key, team.id)

    async def post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        async with http(self.gw, self.key) as client:
            return await client.post(path, json=body, headers={"anthropic-version": "2023-06-01"})

    async def ledger(self) -> Decimal:
        async with http(self.gw) as admin:
            rows = (await admin.get("/admin/spend?group_by=team")).json()["rows"]
        return sum((Decimal(r["cost_usd"]) for r in rows if r["group"] == self.id), Decimal(0))

    async def reserved(self) -> Decimal:
        async with http(self.gw) as admin:
            budgets = (await admin.get("/admin/budgets")).json()["data"]
        return sum((Decimal(b["reserved_usd"]) for b in budgets if b["subject"] == self.id), Decimal(0))


def bill_cost(before: dict[str, int], after: dict[str, int]) -> Decimal:
    prompt = after["prompt_tokens"] - before["prompt_tokens"]
    completion = after["completion_tokens"] - before["completion_tokens"]
    return (prompt * IN + completion * OUT) / 10**6


# (path, gateway model, upstream model the fake bills, body with the text in it)
def chat(model: str, text: str) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": text}], "max_tokens": 16}


ENDPOINTS = {
    "chat": ("/v1/chat/completions", "gpt-4o-mini", lambda t: chat("gpt", t)),
    "completions": ("/v1/completions", "gpt-4o-mini", lambda t: {"model": "gpt", "prompt": t, "max_tokens": 16}),
    "responses": ("/v1/responses", "gpt-4o-mini", lambda t: {"model": "gpt", "input": t, "max_output_tokens": 16}),
    "messages": ("/v1/messages", "gpt-4o-mini", lambda t: {**chat("gpt", t)}),
    "responses-native": ("/v1/responses", "gpt-4o", lambda t: {"model": "native", "input": t, "max_output_tokens": 16}),
    "messages-native": ("/v1/messages", "gpt-4o", lambda t: {**chat("native", t)}),
    "litellm-chat": ("/v1/chat/completions", "claude-haiku-4-5", lambda t: chat("claude", t)),
    "litellm-messages": ("/v1/messages", "claude-haiku-4-5", lambda t: {**chat("claude", t)}),
}


async def send(team: Team, upstream: BytesUpstream, endpoint: str, text: str, stream: bool) -> tuple[int, Decimal]:
    """One request; its status and what the provider billed for it."""
    path, billed_model, body = ENDPOINTS[endpoint]
    before = upstream.billed(billed_model)
    response = await team.post(path, {**body(text), "stream": stream})
    return response.status_code, bill_cost(before, upstream.billed(billed_model))


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("endpoint", list(ENDPOINTS))
async def test_a_run_of_tabs_is_answered_and_billed(
    gateway: FastAPI, upstream: BytesUpstream, endpoint: str, stream: bool
) -> None:
    team = await Team.create(gateway, f"tabs-{endpoint}-{stream}")
    status, billed = await send(team, upstream, endpoint, TAB_RUN, stream)
    # litellm drops a whitespace-only Messages turn, and the provider refuses the empty
    # conversation (400, not billed): an answer or a 4xx, never a 5xx.
    assert status == 200 and billed > 0 or (endpoint == "litellm-messages" and status == 400 and billed == 0)
    assert await team.ledger() == billed  # was $0: the stream aborted before it was charged
    assert await team.reserved() == 0  # the hold is settled when the answer ends, not at restart


@pytest.mark.parametrize("text", ["\x0b" * RUN, "\x0c" * RUN, " " * RUN, "\u3000" * RUN, "\xa0" * RUN, " \t" * RUN])
async def test_every_whitespace_run_is_answered_and_billed(
    gateway: FastAPI, upstream: BytesUpstream, text: str
) -> None:
    team = await Team.create(gateway, f"run-{ord(text[0])}-{len(text)}")
    total = Decimal(0)
    for stream in (True, False):
        status, billed = await send(team, upstream, "chat", text, stream)
        assert status == 200
        total += billed
    assert await team.ledger() == total
    assert await team.reserved() == 0


async def test_count_tokens_counts_a_run_of_tabs(gateway: FastAPI) -> None:
    team = await Team.create(gateway, "count-tabs")
    response = await team.post(
        "/v1/messages/count_tokens", {"model": "gpt", "messages": [{"role": "user", "content": TAB_RUN}]}
    )
    assert response.status_code == 200, response.text
    assert response.json()["input_tokens"] > 0


async def test_a_stream_the_client_left_before_its_first_chunk_is_charged_its_hold(
    gateway: FastAPI, upstream: BytesUpstream
) -> None:
    """The upstream answered (and bills) but the relay never ran: the connection broke as the
    answer started. Settled at once, at the hold (fail closed): it was $0, held until restart."""
    team = await Team.create(gateway, "left-early")
    before = upstream.billed("gpt-4o-mini")
    body = orjson.dumps({**chat("gpt", "hello there"), "stream": True})
    headers = [(b"host", b"gw.test"), (b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/chat/completions",
        "raw_path": b"/v1/chat/completions",
        "query_string": b"",
        "root_path": "",
        "headers": [*headers, (b"authorization", f"Bearer {team.key}".encode())],
        "client": ("127.0.0.1", 1),
        "server": ("gw.test", 80),
    }
    messages = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            raise OSError("the client's connection broke")

    with contextlib.suppress(Exception):
        await gateway(scope, receive, send)
    billed = bill_cost(before, upstream.billed("gpt-4o-mini"))
    assert billed > 0  # the provider answered, and bills it
    assert await team.reserved() == 0
    assert await team.ledger() >= billed


@pytest.mark.parametrize("model", ["claude", "custom"])
@pytest.mark.parametrize("text", ["a" + " " * 8000 + "b", "a" + "\xa0" * 4000 + "b"], ids=["spaces", "nbsp"])
async def test_a_hold_bounds_a_provider_that_bills_every_byte(
    gateway: FastAPI, upstream: BytesUpstream, model: str, text: str
) -> None:
    """Issue 24, item 3: for a model whose tokenizer costgate does not run, emoji, CJK and runs
    billed 1.5-3x the hold (tiktoken's count), and a small budget ended well past its limit. A
    run of spaces is the starkest: tiktoken makes one token of up to 128 of them."""
    team = await Team.create(gateway, f"bytes-{model}-{ord(text[1])}", amount="0.05")
    billed_model = {"claude": "claude-haiku-4-5", "custom": "my-llama"}[model]
    statuses, billed = [], Decimal(0)
    while len(statuses) < 40 and (not statuses or statuses[-1] != 402):
        before = upstream.billed(billed_model)
        statuses.append((await team.post("/v1/chat/completions", chat(model, text))).status_code)
        billed += bill_cost(before, upstream.billed(billed_model))
    assert statuses[-1] == 402 and statuses.count(200) >= 2, statuses
    assert await team.ledger() == billed <= Decimal("0.05")
    assert await team.reserved() == 0


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("text", ["a" + " " * 8000 + "b", "a" + "\xa0" * 4000 + "b", "hello there"])
async def test_an_answer_without_usage_is_charged_the_prompt_the_hold_counted(
    gateway: FastAPI, upstream: BytesUpstream, text: str, stream: bool
) -> None:
    """A provider that reports no usage was charged a tiktoken estimate of the prompt: a run of
    spaces, one token to tiktoken per 128, billed 8000 here. The prompt is now charged at what
    the hold counted (the sent body's UTF-8 bytes for a model whose tokenizer is not tiktoken),
    so the ledger never falls below the bill, and stays within the hold's bound of it."""
    team = await Team.create(gateway, f"silent-{len(text)}-{ord(text[1])}-{stream}")
    before = upstream.billed("my-llama-silent")
    response = await team.post("/v1/chat/completions", {**chat("silent", text), "stream": stream})
    assert response.status_code == 200, response.text
    billed = bill_cost(before, upstream.billed("my-llama-silent"))
    assert billed > 0
    ledger = await team.ledger()
    assert billed <= ledger <= billed + Decimal(300) * IN / 10**6  # the body's JSON around the text
    assert await team.reserved() == 0


@pytest.mark.parametrize(
    "path, body",
    [
        ("/v1/messages/count_tokens", {"model": "gpt", "messages": [{"role": "user", "content": "hello"}]}),
        ("/v1/responses/input_tokens", {"model": "gpt", "input": "hello"}),
    ],
)
async def test_counting_endpoints_are_rate_limited(gateway: FastAPI, path: str, body: dict[str, Any]) -> None:
    """Issue 24, item 7: /v1/messages/count_tokens (and /v1/responses/input_tokens) read and
    tokenized bodies up to the body limit with no rate limit."""
    gw = gateway.state.gateway
    team = f"counting-{path.split('/')[2]}"
    await gw.keys.create_team(team)
    _, key = await gw.keys.create_key(team, plan="enterprise")  # 3 requests a minute here
    async with http(gateway, key) as client:
        statuses = [(await client.post(path, json=body, headers={"anthropic-version": "2023-06-01"})) for _ in range(4)]
    assert [r.status_code for r in statuses] == [200, 200, 200, 429]
    assert statuses[-1].json()["error"]["type"] == "rate_limit_error"  # in each API's own shape


@pytest.mark.slow  # takes seconds in process: out of the fast lane
async def test_nothing_is_reserved_after_the_last_answer_on_any_endpoint(
    gateway: FastAPI, upstream: BytesUpstream
) -> None:
    """Issue 24's target 'nothing reserved 30 s after the last answer', in process: one team sends
    a tab run and an ordinary prompt on every endpoint path, streamed and whole, and the answer
    without usage; once the last answer is read, every budget of the gateway (this module's teams
    too, and a bystander team of its own, so that it does not lean on the tests run before it)
    holds $0. Settling is awaited with the response, so no wait is needed in process."""
    bystander = await Team.create(gateway, "nothing-held-bystander")
    await send(bystander, upstream, "chat", "hello there", True)
    team = await Team.create(gateway, "nothing-held")
    for endpoint in ENDPOINTS:
        for text in (TAB_RUN, "hello there"):
            for stream in (True, False):
                await send(team, upstream, endpoint, text, stream)
    await team.post("/v1/chat/completions", {**chat("silent", "hello"), "stream": True})
    async with http(gateway) as admin:
        budgets = (await admin.get("/admin/budgets")).json()["data"]
    held = {b["subject"]: b["reserved_usd"] for b in budgets if Decimal(b["reserved_usd"])}
    assert {team.id, bystander.id} <= {b["subject"] for b in budgets} and not held, held
    assert await team.ledger() > 0 and await bystander.ledger() > 0
