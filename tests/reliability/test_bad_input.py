"""Bad input, hand-made and fuzzed: every body the gateway cannot serve gets a 4xx in OpenAI's
error shape, nothing gets a 5xx, and the process stays up. tests/gateway/test_errors.py has
the common cases; these are the hostile ones, then schemathesis over GET /openapi.json (read
with the admin key)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.support import ADMIN_KEY, GatewayProcess

pytestmark = pytest.mark.slow  # boots processes: not in the fast lane

MSG = '"messages": [{"role": "user", "content": "x"}]'


def deep(n: int) -> bytes:
    return b'{"model": "small", ' + MSG.encode() + b', "extra": ' + b"[" * n + b"]" * n + b"}"


HOSTILE: list[tuple[str, bytes]] = [
    ("100k nested lists", deep(100_000)),
    ("300 nested lists in an unknown field", deep(300)),  # read by orjson (1024), not writable (254)
    ("1000 nested lists in an unknown field", deep(1000)),
    ("100k nested objects", b'{"model": "small", "x": ' + b'{"a":' * 100_000 + b"1" + b"}" * 100_000 + b"}"),
    (
        "nested lists in content",
        b'{"model": "small", "messages": [{"role": "user", "content": ' + b"[" * 5000 + b"]" * 5000 + b"}]}",
    ),
    (
        "10001 messages",
        json.dumps({"model": "small", "messages": [{"role": "user", "content": "x"}] * 10_001}).encode(),
    ),
    ("prompt of mixed types", b'{"model": "small", "prompt": [[1, 2], "text", [3, "a"]]}'),
    (
        "content part text null",
        b'{"model": "small", "messages": [{"role": "user", "content": [{"type": "text", "text": null}]}]}',
    ),
    ("lone surrogate", b'{"model": "small", "messages": [{"role": "user", "content": "\\ud800"}]}'),
    ("invalid utf-8 in a string", b'{"model": "small", "messages": [{"role": "user", "content": "\xc3\x28"}]}'),
    ("overlong utf-8", b'{"model": "small", "messages": [{"role": "user", "content": "\xc0\xaf"}]}'),
    ("NaN", b'{"model": "small", ' + MSG.encode() + b', "temperature": NaN}'),
    ("Infinity", b'{"model": "small", ' + MSG.encode() + b', "temperature": Infinity}'),
    ("1e400", b'{"model": "small", ' + MSG.encode() + b', "temperature": 1e400}'),
    ("huge integer", b'{"model": "small", ' + MSG.encode() + b', "max_tokens": 1' + b"0" * 400 + b"}"),
    ("2**64 max_tokens", b'{"model": "small", ' + MSG.encode() + b', "max_tokens": 18446744073709551616}'),
    ("float max_tokens", b'{"model": "small", ' + MSG.encode() + b', "max_tokens": 1.5}'),
    ("negative n", b'{"model": "small", ' + MSG.encode() + b', "n": -5}'),
    ("n of a million", b'{"model": "small", ' + MSG.encode() + b', "n": 1000000}'),
    ("negative max_completion_tokens", b'{"model": "small", ' + MSG.encode() + b', "max_completion_tokens": -1}'),
    ("unknown role", b'{"model": "small", "messages": [{"role": "root", "content": "x"}]}'),
    ("role null", b'{"model": "small", "messages": [{"role": null, "content": "x"}]}'),
    ("message not an object", b'{"model": "small", "messages": ["hello"]}'),
    ("content a number", b'{"model": "small", "messages": [{"role": "user", "content": 5}]}'),
    (
        "content part text a number",
        b'{"model": "small", "messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]}',
    ),
    ("content part a string", b'{"model": "small", "messages": [{"role": "user", "content": ["x"]}]}'),
    (
        "tool_calls a string",
        b'{"model": "small", "messages": [{"role": "assistant", "content": null, "tool_calls": "call"}]}',
    ),
    (
        "tool_calls of numbers",
        b'{"model": "small", "messages": [{"role": "assistant", "content": null, "tool_calls": [1, 2]}]}',
    ),
    (
        "tool call function a string",
        b'{"model": "small", "messages": [{"role": "assistant", "content": null, '
        b'"tool_calls": [{"id": "a", "type": "function", "function": "f"}]}]}',
    ),
    ("model an object", b'{"model": {"name": "small"}, ' + MSG.encode() + b"}"),
    ("model empty", b'{"model": "", ' + MSG.encode() + b"}"),
    ("model 10k chars", b'{"model": "' + b"m" * 10_000 + b'", ' + MSG.encode() + b"}"),
    ("stream a string", b'{"model": "small", ' + MSG.encode() + b', "stream": "sometimes"}'),
    ("stream_options a list", b'{"model": "small", ' + MSG.encode() + b', "stream": true, "stream_options": []}'),
    ("metadata values not strings", b'{"model": "small", ' + MSG.encode() + b', "metadata": {"a": {"b": 1}}}'),
    ("user an object", b'{"model": "small", ' + MSG.encode() + b', "user": {"id": 1}}'),
    ("duplicate keys, last bad", b'{"model": "small", ' + MSG.encode() + b', "n": 1, "n": "many"}'),
    ("empty body", b""),
    ("just null", b"null"),
    ("a bare string", b'"hello"'),
    ("trailing garbage", b'{"model": "small", ' + MSG.encode() + b"} trailing"),
    ("NUL bytes", b"\x00" * 1000),
    ("BOM then JSON", b'\xef\xbb\xbf{"model": "small", ' + MSG.encode() + b"}"),
]


@pytest.mark.parametrize("name, body", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_bodies_get_an_openai_4xx(gateway: GatewayProcess, key: str, name: str, body: bytes) -> None:
    path = "/v1/completions" if b'"prompt"' in body else "/v1/chat/completions"
    response = httpx.post(
        gateway.url + path,
        content=body,
        timeout=30,
        headers={"authorization": f"Bearer {key}", "content-type": "application/json"},
    )
    assert 400 <= response.status_code < 500, (response.status_code, response.text[:300])
    error = response.json()["error"]
    assert error["message"] and error["type"] == "invalid_request_error" and "code" in error
    assert len(error["message"]) < 2000  # the body is not echoed back whole


@pytest.mark.parametrize(
    "headers",
    [
        {"x-costgate-max-cost-usd": "NaN"},
        {"x-costgate-max-cost-usd": "-1"},
        {"x-costgate-max-cost-usd": "Infinity"},
        {"x-costgate-tags": "a b,<script>"},
        {"x-costgate-tags": "x" * 5000},
        {"x-costgate-trace-id": "t" * 5000},
        {"x-costgate-cache": "\x7f"},
    ],
)
def test_hostile_headers_get_an_openai_4xx(gateway: GatewayProcess, key: str, headers: dict[str, str]) -> None:
    response = httpx.post(
        gateway.url + "/v1/chat/completions",
        timeout=30,
        headers={"authorization": f"Bearer {key}", **headers},
        json={"model": "small", "messages": [{"role": "user", "content": "x"}]},
    )
    assert 400 <= response.status_code < 500, (response.status_code, response.text[:300])
    assert_error_shape(response)


def assert_error_shape(response: httpx.Response) -> None:
    """OpenAI's shape — except for bytes no HTTP header may hold, which the HTTP server
    (uvicorn's parser) refuses with its own plain 400 before the app sees the request."""
    if response.headers.get("content-type", "").startswith("text/plain"):
        assert response.status_code == 400 and response.text == "Invalid HTTP request received."
        return
    assert response.json()["error"]["message"]


@pytest.mark.parametrize(
    "auth", ["Bearer " + "k" * 7000, "Bearer sk-cg-\x01", "Basic Zm9vOmJhcg==", "Bearer", "bearer  sk-cg-"]
)
def test_hostile_authorization_is_401(gateway: GatewayProcess, auth: str) -> None:
    response = httpx.post(
        gateway.url + "/v1/chat/completions",
        timeout=30,
        headers={"authorization": auth},
        json={"model": "small", "messages": [{"role": "user", "content": "x"}]},
    )
    if "\x01" in auth:
        assert_error_shape(response)
        return
    assert response.status_code == 401, response.text
    assert response.json()["error"]["type"] == "authentication_error"


def test_the_gateway_is_still_up_and_serving(gateway: GatewayProcess, key: str) -> None:
    assert gateway.proc is not None and gateway.proc.poll() is None
    assert (
        gateway.client(key)
        .chat.completions.create(model="small", messages=[{"role": "user", "content": "still here"}])
        .choices[0]
        .message.content
    )


def schema_file(gateway: GatewayProcess, tmp_path: Path) -> str:
    """The OpenAPI document, which only the admin key may read, saved for schemathesis."""
    response = gateway.admin("GET", "/openapi.json")
    assert response.status_code == 200, response.text
    path = tmp_path / "openapi.json"
    path.write_bytes(response.content)
    return str(path)


def test_schemathesis_finds_no_server_error(gateway: GatewayProcess, key: str, tmp_path: Path) -> None:
    """Fuzz every OpenAI route from the published schema (bounded: a few dozen cases each),
    positive and negative data, with a real key: no 5xx, no crash. One worker: hypothesis's
    lambda descriptions hit a CPython 3.11 `ast` thread-safety error with two."""
    report = tmp_path / "report.json"
    cmd = [
        sys.executable,
        "-m",
        "schemathesis.cli",
        "run",
        schema_file(gateway, tmp_path),
        "--url",
        gateway.url,
        "--checks",
        "not_a_server_error",
        "--max-examples",
        "15",
        "--phases",
        "coverage,fuzzing",
        "--include-path-regex",
        "^/v1/(chat/completions|completions|embeddings|models)$",
        "-H",
        f"Authorization: Bearer {key}",
        "--request-timeout",
        "20",
        "--workers",
        "1",
        "--seed",
        "8",
        "--generation-database",
        "none",
        "--max-time",
        "35",
        "--no-color",
        "--report",
        "json",
        "--report-json-path",
        str(report),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=150, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert "not_a_server_error" in done.stdout or report.exists()
    assert gateway.proc is not None and gateway.proc.poll() is None


def test_schemathesis_on_the_admin_api_finds_no_server_error(gateway: GatewayProcess, tmp_path: Path) -> None:
    cmd = [
        sys.executable,
        "-m",
        "schemathesis.cli",
        "run",
        schema_file(gateway, tmp_path),
        "--url",
        gateway.url,
        "--checks",
        "not_a_server_error",
        "--max-examples",
        "8",
        "--phases",
        "coverage,fuzzing",
        "--include-path-regex",
        "^/admin/(teams|keys|spend|budgets)",
        "-H",
        f"Authorization: Bearer {ADMIN_KEY}",
        "--request-timeout",
        "20",
        "--workers",
        "1",
        "--seed",
        "8",
        "--generation-database",
        "none",
        "--max-time",
        "20",
        "--no-color",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert gateway.proc is not None and gateway.proc.poll() is None


@pytest.mark.parametrize("amount", ["731798578.38", "1e9", "-1", "NaN", "Infinity", "1e400"])
def test_budget_amounts_beyond_what_a_counter_holds_are_400(gateway: GatewayProcess, amount: str) -> None:
    """Found by schemathesis: $731M overflowed the 64-bit pico-dollar column and answered 500."""
    response = httpx.put(
        gateway.url + "/admin/budgets",
        timeout=30,
        headers={"authorization": f"Bearer {ADMIN_KEY}", "content-type": "application/json"},
        content=b'{"scope": "tag", "id": "t", "period": "total", "amount_usd": ' + amount.encode() + b"}",
    )
    assert response.status_code == 400, response.text
    assert response.json()["error"]["type"] == "invalid_request_error"
