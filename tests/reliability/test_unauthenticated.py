"""No unauthenticated work (issue 16, item 4), attacked over raw HTTP: a wrong key gets its
answer before any body is read, bodies are capped everywhere, refusals without a key leave no
ledger row (a metric counts them), the dashboard's sign-in stops guessers, and the API's
schema and docs are closed."""

from __future__ import annotations

import socket
import sqlite3
from collections.abc import Iterable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.support import ADMIN_KEY, FakeUpstream, GatewayProcess, model

pytestmark = pytest.mark.slow  # boots processes: not in the fast lane

MB = 1024 * 1024


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream) -> Iterator[GatewayProcess]:
    gateway = GatewayProcess(
        {
            "models": [model("small", "echo-small", fake_upstream.url)],
            "batch": {"max_file_bytes": MB},
            "dashboard": {"login_attempts_per_address": 4, "login_attempts_overall": 10},
        },
        tmp_path_factory.mktemp("gw-unauth"),
    )
    yield gateway
    gateway.stop()


@pytest.fixture(scope="module")
def key(gw: GatewayProcess) -> str:
    return gw.new_key("team-unauth")


def rss_bytes(gw: GatewayProcess) -> int:
    assert gw.proc is not None
    for line in Path(f"/proc/{gw.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def raw_post(gw: GatewayProcess, path: str, headers: dict[str, str], body: Iterable[bytes] = ()) -> tuple[int, str]:
    """Send the head, then as much of `body` as the server takes, then read its answer: the
    status and the whole response. The server may answer and close before the body is sent."""
    head = f"POST {path} HTTP/1.1\r\nhost: x\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    with socket.create_connection(("127.0.0.1", gw.port), timeout=30) as sock:
        sock.sendall(head.encode())
        try:
            for chunk in body:
                sock.sendall(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused and closed mid-body: the answer is already waiting
        received = b""
        try:
            while data := sock.recv(65536):
                received += data
        except ConnectionResetError:
            pass
    text = received.decode("latin-1")
    return int(text.split(" ", 2)[1]), text


def chunked(total: int, piece: int = MB) -> Iterator[bytes]:
    sent = 0
    while sent < total:
        yield f"{piece:x}\r\n".encode() + b"x" * piece + b"\r\n"
        sent += piece
    yield b"0\r\n\r\n"


def metric(gw: GatewayProcess, name: str, label: str) -> float:
    for line in httpx.get(gw.url + "/metrics").text.splitlines():
        if line.startswith(name + "{") and label in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def ledger_rows(gw: GatewayProcess) -> int:
    gw.spend()  # flushes the ledger
    with sqlite3.connect(gw.workdir / "costgate.db") as db:
        return db.execute("SELECT count(*) FROM ledger").fetchone()[0]


@pytest.mark.parametrize("path", ["/admin/teams", "/admin/keys", "/admin/budgets"])
def test_a_wrong_admin_key_is_refused_before_a_200_mb_body_is_read(gw: GatewayProcess, path: str) -> None:
    before = rss_bytes(gw)
    for auth in ("Bearer wrong", None):
        headers = {"content-type": "application/json", "content-length": str(200 * MB)}
        if auth:
            headers["authorization"] = auth
        status, text = raw_post(gw, path, headers)  # the head alone: the answer may not wait for the body
        assert status == 401 and '"type":"authentication_error"' in text and "connection: close" in text
        del headers["content-length"]
        status, text = raw_post(gw, path, {**headers, "transfer-encoding": "chunked"}, chunked(64 * MB))
        assert status == 401
    assert rss_bytes(gw) - before < 40 * MB


@pytest.mark.parametrize("path", ["/admin/teams", "/admin/ui/login", "/admin/ui/teams", "/v1/batches"])
def test_bodies_past_the_cap_are_413_declared_or_chunked(gw: GatewayProcess, key: str, path: str) -> None:
    auth = ADMIN_KEY if path.startswith("/admin/") else key
    before = rss_bytes(gw)
    headers = {"authorization": f"Bearer {auth}", "content-type": "application/json"}
    status, text = raw_post(gw, path, {**headers, "content-length": str(200 * MB)})
    assert status == 413 and '"code":"request_too_large"' in text
    status, text = raw_post(gw, path, {**headers, "transfer-encoding": "chunked"}, chunked(64 * MB))
    assert status == 413 and '"type":"invalid_request_error"' in text
    assert rss_bytes(gw) - before < 40 * MB
    # under the cap, the same routes still work
    assert gw.admin("POST", "/admin/teams", json={"name": "fine-after " + path}).status_code == 200


def test_an_upload_past_the_file_limit_is_413_and_keeps_nothing(gw: GatewayProcess, key: str) -> None:
    boundary = "b0undary"
    part = (
        f'--{boundary}\r\ncontent-disposition: form-data; name="purpose"\r\n\r\nbatch\r\n--{boundary}\r\n'
        f'content-disposition: form-data; name="file"; filename="a.jsonl"\r\n'
        f"content-type: application/octet-stream\r\n\r\n"
    ).encode()
    headers = {
        "authorization": f"Bearer {key}",
        "content-type": f"multipart/form-data; boundary={boundary}",
        "transfer-encoding": "chunked",
    }
    body = [f"{len(part):x}\r\n".encode() + part + b"\r\n", *chunked(16 * MB)]
    status, text = raw_post(gw, "/v1/files", headers, body)
    assert status == 413, text[:500]
    assert not list((gw.workdir / "data").glob("files/*"))
    files = httpx.get(gw.url + "/v1/files", headers={"authorization": f"Bearer {key}"}).json()["data"]
    assert files == []


def test_requests_without_a_valid_key_leave_no_ledger_row_only_a_metric(gw: GatewayProcess, key: str) -> None:
    rows, counted = ledger_rows(gw), metric(gw, "costgate_unauthenticated_requests_total", 'area="v1"')
    body = {"model": "small", "messages": [{"role": "user", "content": "hi"}]}
    for i in range(150):
        auth = {0: {}, 1: {"authorization": f"Bearer sk-cg-made-up-{i}"}, 2: {"authorization": "Basic x"}}[i % 3]
        path = ("/v1/chat/completions", "/v1/embeddings", "/v1/completions")[i % 3]
        response = httpx.post(gw.url + path, headers=auth, content=b"{not json" if i % 2 else b"", timeout=30)
        assert response.status_code == 401 and response.json()["error"]["type"] == "authentication_error"
    response = httpx.post(gw.url + "/v1/chat/completions", headers={"authorization": "Bearer sk-cg-nope"}, json=body)
    assert response.status_code == 401
    assert ledger_rows(gw) == rows
    assert metric(gw, "costgate_unauthenticated_requests_total", 'area="v1"') == counted + 151
    # an authenticated request keeps its row, refused or not
    auth = {"authorization": f"Bearer {key}"}
    assert httpx.post(gw.url + "/v1/chat/completions", headers=auth, content=b"{not json").status_code == 400
    assert httpx.post(gw.url + "/v1/chat/completions", headers=auth, json={**body, "model": "nope"}).status_code == 404
    assert httpx.post(gw.url + "/v1/chat/completions", headers=auth, json=body).status_code == 200
    assert ledger_rows(gw) == rows + 3


def login(gw: GatewayProcess, admin_key: str, address: str) -> httpx.Response:
    # uvicorn takes the client address from x-forwarded-for when the peer is 127.0.0.1 (a local proxy)
    return httpx.post(
        gw.url + "/admin/ui/login", data={"admin_key": admin_key}, headers={"x-forwarded-for": address}, timeout=30
    )


def test_dashboard_sign_in_stops_guessing_per_address_and_overall(gw: GatewayProcess) -> None:
    for _ in range(4):
        assert login(gw, "sk-cg-admin-guess", "10.0.0.1").status_code == 401
    refused = login(gw, ADMIN_KEY, "10.0.0.1")  # even the right key: a guesser must learn nothing
    assert refused.status_code == 429 and int(refused.headers["retry-after"]) >= 1
    assert "set-cookie" not in refused.headers
    assert login(gw, ADMIN_KEY, "10.0.0.2").status_code == 303  # another address signs in
    for i in range(3, 9):  # wrong keys spread over addresses, up to the overall limit of 10
        assert login(gw, "sk-cg-admin-guess", f"10.0.0.{i}").status_code == 401
    refused = login(gw, ADMIN_KEY, "10.0.0.200")
    assert refused.status_code == 429 and int(refused.headers["retry-after"]) >= 1
    # the admin API, with its bearer key, stays open
    assert gw.admin("GET", "/admin/teams").status_code == 200


def test_the_schema_needs_the_admin_key_and_the_docs_are_off(gw: GatewayProcess, key: str) -> None:
    for auth in ({}, {"authorization": f"Bearer {key}"}):
        response = httpx.get(gw.url + "/openapi.json", headers=auth)
        assert response.status_code == 401 and response.json()["error"]["code"] == "invalid_admin_key"
    assert "/v1/chat/completions" in gw.admin("GET", "/openapi.json").json()["paths"]
    for path in ("/docs", "/redoc", "/docs/oauth2-redirect"):
        assert httpx.get(gw.url + path).status_code == 404
        assert gw.admin("GET", path).status_code == 404


def test_the_gateway_still_answers(gw: GatewayProcess, key: str) -> None:
    reply = gw.client(key).chat.completions.create(model="small", messages=[{"role": "user", "content": "up?"}])
    assert reply.choices[0].message.content == "echo: up?"  # the upstream's answer, passed through
