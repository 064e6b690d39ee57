"""The small holes of issue 16 (item 6), attacked over HTTP: idle connections that never
finish their headers, cut-off uploads, keys that never expire, world-readable data, and
refused requests that were never rate-limited. (Bodies nested past 254 levels:
test_bad_input.py.)"""

from __future__ import annotations

import socket
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support import ADMIN_KEY, FakeUpstream, GatewayProcess, model, wait_until

pytestmark = pytest.mark.slow  # boots processes: not in the fast lane

HEADER_TIMEOUT_S = 1.0


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream) -> Iterator[GatewayProcess]:
    gateway = GatewayProcess(
        {"models": [model("small", "echo-small", fake_upstream.url)], "header_timeout_s": HEADER_TIMEOUT_S},
        tmp_path_factory.mktemp("gw-holes"),
    )
    yield gateway
    gateway.stop()


def closed_by_server(sock: socket.socket, deadline_s: float) -> bool:
    """Whether the server closes `sock` (EOF) within `deadline_s`, reading whatever it sends."""
    sock.settimeout(deadline_s)
    try:
        while sock.recv(4096):
            pass
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True
    return True


@pytest.mark.parametrize(
    "sent", [b"", b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n", b"GET /healthz HTTP/1.1\r\nhost: x\r\nx-slow: "]
)
def test_connections_that_never_finish_their_headers_are_closed(gw: GatewayProcess, sent: bytes) -> None:
    with socket.create_connection(("127.0.0.1", gw.port)) as sock:
        sock.sendall(sent)
        assert closed_by_server(sock, HEADER_TIMEOUT_S + 10)


def test_a_header_drip_does_not_move_the_deadline(gw: GatewayProcess) -> None:
    with socket.create_connection(("127.0.0.1", gw.port)) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nhost: x\r\n")
        closed, give_up = False, time.monotonic() + HEADER_TIMEOUT_S + 10
        while not closed and time.monotonic() < give_up:
            try:
                sock.sendall(b"x-drip: 1\r\n")  # a byte now and then: uvicorn alone waits forever
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            closed = closed_by_server(sock, 0.2)
        assert closed


def test_a_keep_alive_connection_still_serves_requests(gw: GatewayProcess) -> None:
    with httpx.Client(base_url=gw.url) as client:  # one connection, requests well inside the deadline
        for _ in range(3):
            assert client.get("/healthz").status_code == 200


def test_a_cut_off_upload_logs_one_line(gw: GatewayProcess) -> None:
    key = gw.new_key("team-holes")
    before = gw.log_path.read_text()
    for path, ctype in (("/v1/files", "multipart/form-data; boundary=b"), ("/v1/chat/completions", "application/json")):
        with socket.create_connection(("127.0.0.1", gw.port)) as sock:
            sock.sendall(
                f"POST {path} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {key}\r\ncontent-type: {ctype}\r\n"
                f"content-length: 1000000\r\n\r\n".encode()
                + b"--b\r\ncontent-disposition: form-data; "
                b'name="file"; filename="a"\r\n\r\n' + b"x" * 50_000
            )

    def logged_since() -> str:
        return gw.log_path.read_text()[len(before) :]

    wait_until(lambda: logged_since().count("client disconnected") >= 2, timeout=20, what="both uploads logged")
    logged = logged_since()
    assert logged.count("client disconnected") == 2, logged[-3000:]
    assert "Traceback" not in logged and "ERROR" not in logged
    assert httpx.get(gw.url + "/healthz").status_code == 200


@pytest.mark.parametrize("expires", [b"NaN", b"Infinity", b"-Infinity", b"1e400", b'"NaN"', b'"inf"'])
def test_a_key_that_never_expires_is_refused(gw: GatewayProcess, expires: bytes) -> None:
    gw.admin("POST", "/admin/teams", json={"name": "team-expiry"})
    response = httpx.post(
        gw.url + "/admin/keys",
        content=b'{"team": "team-expiry", "expires_at": ' + expires + b"}",
        headers={"authorization": f"Bearer {ADMIN_KEY}", "content-type": "application/json"},
    )
    assert response.status_code == 400, response.text
    assert response.json()["error"]["type"] == "invalid_request_error"
    finite = gw.admin("POST", "/admin/keys", json={"team": "team-expiry", "expires_at": time.time() - 1})
    assert finite.status_code == 200
    expired = httpx.get(gw.url + "/v1/models", headers={"authorization": f"Bearer {finite.json()['key']}"})
    assert expired.status_code == 401


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_data_is_readable_by_the_gateway_alone(gw: GatewayProcess) -> None:
    key = gw.new_key("team-files")
    line = (
        b'{"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", "body": {"model": "small", '
        b'"messages": [{"role": "user", "content": "hi"}]}}\n'
    )
    upload = httpx.post(
        gw.url + "/v1/files",
        headers={"authorization": f"Bearer {key}"},
        files={"file": ("in.jsonl", line)},
        data={"purpose": "batch"},
    )
    assert upload.status_code == 200, upload.text
    data = gw.workdir / "data"
    assert mode(data) == 0o700
    db = gw.workdir / "costgate.db"
    for path in [db, *db.parent.glob("costgate.db-*"), *(data / "files").iterdir(), *(data / "journal").iterdir()]:
        assert mode(path) == 0o600, path


def test_refused_requests_count_against_the_key_request_rate(gw: GatewayProcess) -> None:
    """A free key (20 requests a minute) sending unknown models, bad bodies and a forbidden
    model gets 429 once past its rate, as it would sending good requests."""
    key = gw.new_key("team-free", plan="free")
    auth = {"authorization": f"Bearer {key}"}
    statuses = []
    for i in range(30):
        body = (
            {"model": f"no-such-{i}", "messages": [{"role": "user", "content": "x"}]},
            b"{broken",
            {"model": "small", "messages": "not a list"},
        )[i % 3]
        response = (
            httpx.post(gw.url + "/v1/chat/completions", headers=auth, content=body)
            if isinstance(body, bytes)
            else httpx.post(gw.url + "/v1/chat/completions", headers=auth, json=body)
        )
        statuses.append(response.status_code)
    assert set(statuses[:20]) <= {400, 404} and statuses[20:] == [429] * 10, statuses
    last = httpx.post(gw.url + "/v1/chat/completions", headers=auth, json={"model": "small", "messages": []})
    assert last.status_code == 429 and int(last.headers["retry-after"]) >= 1
    assert last.json()["error"]["code"] == "rate_limit_exceeded"
