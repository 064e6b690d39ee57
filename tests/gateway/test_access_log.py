"""The access log (issue 28 item 4): one line a request carrying its id (pipeline requests with
team, model, status, tokens, cost, latency, cache), a line for each failure, JSON lines when
asked, `--log-level` that works, and a client that leaves mid-stream visible in the ledger row
and the log."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
import openai
import orjson
import pytest

from gateway.cli import build_parser
from gateway.edge.access_log import JsonFormatter, configure_logging
from tests.gateway.in_process import (
    chat_answer,
    http_client,
    ledger_rows,
    new_key,
    openai_client,
    openai_model,
    running_app,
    settings_for,
)

HI = [{"role": "user", "content": "hi"}]
DRIP_CHUNKS = 50


def chunk(text: str) -> bytes:
    data = {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "u",
        "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}],
    }
    return b"data: " + orjson.dumps(data) + b"\n\n"


async def drip() -> AsyncIterator[bytes]:
    for i in range(DRIP_CHUNKS):
        yield chunk(f"w{i} ")
        await asyncio.sleep(0.02)
    yield b"data: [DONE]\n\n"


@pytest.fixture(scope="module")
async def app(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Any]:
    def upstream(request: httpx.Request) -> httpx.Response:
        body = orjson.loads(request.content)
        if body["model"] == "fails":
            return httpx.Response(500, json={"error": {"message": "boom"}})
        if body.get("stream"):
            return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=drip())
        return httpx.Response(200, json=chat_answer(prompt=5, completion=2))

    models = [openai_model("m"), openai_model("fails")]
    async with running_app(settings_for(tmp_path_factory.mktemp("log"), models), httpx.MockTransport(upstream)) as app:
        yield app


def lines_for(caplog: pytest.LogCaptureFixture, request_id: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "costgate.access" and request_id in r.getMessage()]


async def test_every_request_has_a_line_with_its_id(app: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "costgate.access")
    client = openai_client(app, await new_key(app, "team-log"))
    ok = await client.chat.completions.create(model="m", messages=HI)
    with pytest.raises(openai.NotFoundError) as unknown:
        await client.chat.completions.create(model="nope", messages=HI)
    with pytest.raises(openai.InternalServerError) as failed:
        await client.chat.completions.create(model="fails", messages=HI)
    with pytest.raises(openai.AuthenticationError) as bad_key:
        await openai_client(app, "sk-cg-wrong").chat.completions.create(model="m", messages=HI)
    async with http_client(app) as http:
        models = await http.get("/v1/models")
    ids = [
        ok._request_id,
        unknown.value.request_id,
        failed.value.request_id,
        bad_key.value.request_id,
        models.headers["x-request-id"],
    ]
    for request_id in ids:
        assert request_id is not None
        assert len(lines_for(caplog, request_id)) == 1, request_id  # one line, not two

    [line] = lines_for(caplog, ok._request_id)
    fields = line.access  # type: ignore[attr-defined]
    assert fields["team"] == "team-log" and fields["model"] == fields["served_model"] == "m"
    assert (fields["status"], fields["prompt_tokens"], fields["completion_tokens"]) == (200, 5, 2)
    assert fields["cost_usd"] == "0.000009" and fields["cache"] == "miss" and fields["latency_ms"] > 0
    assert "team=team-log" in line.getMessage() and "status=200" in line.getMessage()
    [line] = lines_for(caplog, failed.value.request_id)
    assert line.levelno == logging.WARNING and "status=502" in line.getMessage() and "error=" in line.getMessage()
    [line] = lines_for(caplog, unknown.value.request_id)
    assert "status=404" in line.getMessage() and "does not exist" in line.getMessage()


def test_json_lines_carry_the_fields() -> None:
    record = logging.LogRecord("costgate.access", logging.INFO, __file__, 1, "req_1 status=200", None, None)
    record.access = {"request_id": "req_1", "status": 200, "cost_usd": "0.1"}
    line = orjson.loads(JsonFormatter().format(record))
    assert line["request_id"] == "req_1" and line["status"] == 200 and line["level"] == "info"
    assert line["logger"] == "costgate.access" and line["ts"].endswith("Z")
    other = logging.LogRecord("costgate", logging.ERROR, __file__, 1, "boom %s", ("x",), None)
    assert orjson.loads(JsonFormatter().format(other))["message"] == "boom x"


def test_log_level_and_format_take_effect() -> None:
    args = build_parser().parse_args(["serve", "--log-level", "DEBUG", "--log-format", "json"])
    assert (args.log_level, args.log_format) == ("debug", "json")
    root, httpx_logger = logging.getLogger(), logging.getLogger("httpx")
    handlers, level, httpx_level = list(root.handlers), root.level, httpx_logger.level
    try:
        configure_logging("warning", json_lines=True)
        assert root.level == logging.WARNING
        assert isinstance(root.handlers[-1].formatter, JsonFormatter)
        assert not logging.getLogger("costgate.access").isEnabledFor(logging.INFO)
        configure_logging("debug", json_lines=False)
        assert logging.getLogger("costgate.access").isEnabledFor(logging.DEBUG)
    finally:
        for h in list(root.handlers):
            root.removeHandler(h)
        for h in handlers:
            root.addHandler(h)
        root.setLevel(level)
        httpx_logger.setLevel(httpx_level)  # left at debug, httpx's lines reach handlers of tests run later


async def leave_after_two_chunks(app: Any, path: str, body: bytes, auth: tuple[bytes, bytes]) -> tuple[str, int]:
    """Straight over ASGI, as uvicorn calls the app: the client reads two chunks, then goes
    away. The request's id and how many chunks were sent."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},  # uvicorn's
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [auth, (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        "client": ("127.0.0.1", 5000),
        "server": ("gw.test", 80),
    }
    chunks: list[bytes] = []
    headers: dict[bytes, bytes] = {}
    two_read = asyncio.Event()
    body_sent = False

    async def receive() -> dict:
        nonlocal body_sent
        if not body_sent:
            body_sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await two_read.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        if message["type"] == "http.response.start":
            headers.update(message["headers"])
        elif message.get("body"):
            chunks.append(message["body"])
            if len(chunks) >= 2:
                two_read.set()

    await asyncio.wait_for(app(scope, receive, send), 10)
    request_id = (headers.get(b"x-request-id") or headers[b"request-id"]).decode()
    return request_id, len(chunks)


@pytest.mark.parametrize("api", ["chat", "messages"])
async def test_a_client_leaving_mid_stream_is_in_the_ledger_and_the_log(
    app: Any, caplog: pytest.LogCaptureFixture, api: str
) -> None:
    caplog.set_level(logging.INFO, "costgate.access")
    key = await new_key(app, "team-leaves")
    if api == "chat":
        body = {"model": "m", "stream": True, "messages": HI}
        request_id, sent = await leave_after_two_chunks(
            app, "/v1/chat/completions", orjson.dumps(body), (b"authorization", f"Bearer {key}".encode())
        )
    else:
        body = {"model": "m", "stream": True, "max_tokens": 500, "messages": HI}
        request_id, sent = await leave_after_two_chunks(
            app, "/v1/messages", orjson.dumps(body), (b"x-api-key", key.encode())
        )
    assert 2 <= sent < DRIP_CHUNKS  # cut short
    [row] = [r for r in await ledger_rows(app) if r["request_id"] == request_id]
    assert row["status"] == 499 and "disconnected" in row["error"]
    assert row["completion_tokens"] > 0  # charged what the upstream produced until then
    [line] = lines_for(caplog, request_id)
    assert line.levelno == logging.WARNING and "status=499" in line.getMessage()
