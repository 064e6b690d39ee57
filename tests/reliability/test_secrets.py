"""Secrets and isolation: keys are hashed at rest and never written in clear to a log, the
ledger or an error; admin routes take the admin key alone; a team reaches nothing of another's;
a provider key never reaches a client, even from an upstream that echoes it; and no request
field or header can point upstream traffic anywhere the admin's config did not."""

from __future__ import annotations

import hashlib
import secrets
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.reliability.services import FaultyUpstreamProcess
from tests.support import ADMIN_KEY, FakeUpstream, GatewayProcess, model

pytestmark = pytest.mark.slow  # boots processes: not in the fast lane

PROVIDER_KEY = "sk-provider-" + secrets.token_hex(16)
HI = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def canary(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultyUpstreamProcess]:
    """Where a hostile request would like upstream traffic to go: it must get nothing."""
    up = FaultyUpstreamProcess(tmp_path_factory.mktemp("canary"))
    yield up
    up.stop()


@pytest.fixture(scope="module")
def gw(
    tmp_path_factory: pytest.TempPathFactory, faulty: FaultyUpstreamProcess, fake_upstream: FakeUpstream
) -> Iterator[GatewayProcess]:
    key = "env:COSTGATE_TEST_PROVIDER_KEY"
    models = [
        model(name, name, faulty.url) | {"api_key": key}
        for name in ("ok", "echo-auth", "echo-auth-200", "echo-auth-stream", "status-401", "status-500")
    ]
    models.append(model("cached", "echo-small", fake_upstream.url))
    models.append(
        model("via-litellm", "echo-small", fake_upstream.url)
        | {"provider": "litellm", "model": "openai/echo-small", "api_key": key}
    )
    models += [
        model(f"litellm-{name}", name, faulty.url) | {"provider": "litellm", "model": f"openai/{name}", "api_key": key}
        for name in ("echo-auth", "echo-auth-200", "echo-auth-stream")
    ]
    gateway = GatewayProcess(
        {"models": models}, tmp_path_factory.mktemp("gw-secrets"), env={"COSTGATE_TEST_PROVIDER_KEY": PROVIDER_KEY}
    )
    yield gateway
    gateway.stop()


@pytest.fixture(scope="module")
def keys(gw: GatewayProcess) -> dict[str, str]:
    return {"x": gw.new_key("team-x"), "y": gw.new_key("team-y")}


def chat(gw: GatewayProcess, key: str, **body: object) -> httpx.Response:
    return httpx.post(
        gw.url + "/v1/chat/completions",
        headers={"authorization": f"Bearer {key}"},
        timeout=30,
        json={"messages": HI, **body},
    )


@pytest.mark.parametrize(
    "name", ["echo-auth", "echo-auth-200", "status-401", "litellm-echo-auth", "litellm-echo-auth-200"]
)
def test_a_provider_key_echoed_upstream_never_reaches_the_client(
    gw: GatewayProcess, keys: dict[str, str], name: str
) -> None:
    response = chat(gw, keys["x"], model=name)
    assert PROVIDER_KEY not in response.text
    assert PROVIDER_KEY not in str(response.headers)
    if name.endswith("echo-auth"):  # the upstream blamed the request: its message is relayed, redacted
        assert response.status_code == 400 and "[redacted]" in response.json()["error"]["message"]
    if name.endswith("echo-auth-200"):  # a misbehaving upstream's answer is passed on, redacted
        assert response.status_code == 200 and "[redacted]" in response.text


@pytest.mark.parametrize("name", ["echo-auth-stream", "litellm-echo-auth-stream"])
def test_a_provider_key_echoed_in_a_stream_never_reaches_the_client(
    gw: GatewayProcess, keys: dict[str, str], name: str
) -> None:
    with httpx.stream(
        "POST",
        gw.url + "/v1/chat/completions",
        headers={"authorization": f"Bearer {keys['x']}"},
        json={"model": name, "messages": HI, "stream": True},
        timeout=30,
    ) as r:
        text = r.read().decode()
    assert "data: [DONE]" in text and "[redacted]" in text
    assert PROVIDER_KEY not in text


HOSTILE_BODY = {
    "api_base": "{canary}",
    "base_url": "{canary}",
    "api_key": "sk-client-own",
    "extra_headers": {"x-evil": "1"},
    "custom_llm_provider": "openai",
}
HOSTILE_HEADERS = {
    "x-api-base": "{canary}",
    "api-base": "{canary}",
    "x-costgate-api-base": "{canary}",
    "openai-base-url": "{canary}",
    "x-forwarded-host": "{host}",
    "forwarded": "host={host}",
    "x-upstream": "{canary}",
}


@pytest.mark.parametrize("name", ["ok", "via-litellm"])
def test_no_request_field_or_header_redirects_upstream_traffic(
    gw: GatewayProcess, keys: dict[str, str], canary: FaultyUpstreamProcess, name: str
) -> None:
    host = f"127.0.0.1:{canary.port}"
    fill = {k: v.format(canary=canary.url, host=host) if isinstance(v, str) else v for k, v in HOSTILE_BODY.items()}
    headers = {k: v.format(canary=canary.url, host=host) for k, v in HOSTILE_HEADERS.items()}
    response = httpx.post(
        gw.url + "/v1/chat/completions",
        timeout=60,
        headers={"authorization": f"Bearer {keys['x']}", **headers},
        json={"model": name, "messages": HI, **fill},
    )
    assert response.status_code == 200, response.text
    assert canary.stats() == {}  # not one call went to the client's host
    assert response.headers["x-costgate-model"] == name


def test_user_keys_and_no_key_cannot_reach_the_admin_api(gw: GatewayProcess, keys: dict[str, str]) -> None:
    paths = [
        ("GET", "/admin/teams"),
        ("GET", "/admin/keys"),
        ("GET", "/admin/spend?group_by=team"),
        ("GET", "/admin/budgets"),
        ("POST", "/admin/keys"),
        ("POST", "/admin/teams"),
        ("GET", "/admin/chargeback.csv"),
    ]
    for auth in [
        f"Bearer {keys['x']}",
        "",
        "Bearer " + ADMIN_KEY[:-1],
        "Bearer " + ADMIN_KEY + "x",
        "Basic " + ADMIN_KEY,
        PROVIDER_KEY,
    ]:
        for method, path in paths:
            r = httpx.request(method, gw.url + path, headers={"authorization": auth} if auth else {}, json={})
            assert r.status_code == 401, (auth[:12], method, path, r.status_code)
            assert r.json()["error"]["type"] == "authentication_error"
    assert gw.admin("GET", "/admin/teams").status_code == 200  # the admin key itself works


def test_the_admin_key_is_not_a_user_key(gw: GatewayProcess) -> None:
    assert chat(gw, ADMIN_KEY, model="ok").status_code == 401


def test_one_team_never_gets_another_teams_cache_entry(gw: GatewayProcess, keys: dict[str, str]) -> None:
    body = {"model": "cached", "temperature": 0, "messages": [{"role": "user", "content": secrets.token_hex(8)}]}
    first = chat(gw, keys["x"], **body)
    again = chat(gw, keys["x"], **body)
    other = chat(gw, keys["y"], **body)
    assert first.status_code == again.status_code == other.status_code == 200
    assert again.headers["x-costgate-cache"] == "exact"  # team x's own entry serves team x
    assert other.headers["x-costgate-cache"] == "miss"  # and never team y


def test_one_team_never_reads_another_teams_files_or_batches(gw: GatewayProcess, keys: dict[str, str]) -> None:
    line = (
        b'{"custom_id": "1", "method": "POST", "url": "/v1/chat/completions", '
        b'"body": {"model": "ok", "messages": []}}\n'
    )
    up = httpx.post(
        gw.url + "/v1/files",
        headers={"authorization": f"Bearer {keys['x']}"},
        files={"file": ("in.jsonl", line)},
        data={"purpose": "batch"},
    )
    if up.status_code == 404:
        pytest.skip("the Batch API is not in this build")
    assert up.status_code == 200, up.text
    file_id = up.json()["id"]
    theirs = {"authorization": f"Bearer {keys['y']}"}
    assert httpx.get(gw.url + f"/v1/files/{file_id}", headers=theirs).status_code == 404
    assert httpx.get(gw.url + f"/v1/files/{file_id}/content", headers=theirs).status_code == 404
    listed = httpx.get(gw.url + "/v1/files", headers=theirs)
    assert listed.status_code == 200 and file_id not in listed.text


def test_no_secret_is_written_in_clear_anywhere(
    gw: GatewayProcess, keys: dict[str, str], faulty: FaultyUpstreamProcess
) -> None:
    """Traffic with every kind of failure, then every log and database file is searched for
    every secret. The config file is where the admin put them, so it alone is skipped."""
    bad = {"authorization": f"Bearer {keys['x']}"}
    for body in (
        {"model": "ok"},
        {"model": "status-500"},
        {"model": "status-401"},
        {"model": "echo-auth"},
        {"model": "nope"},
        {"model": "ok", "stream": True},
        {"model": "ok", "n": 0},
    ):
        chat(gw, keys["x"], **body)
    httpx.post(gw.url + "/v1/chat/completions", headers=bad, content=b"{broken")
    for wrong in (keys["x"][:-2] + "zz", ADMIN_KEY, PROVIDER_KEY, "sk-cg-" + secrets.token_hex(20)):
        chat(gw, wrong, model="ok")  # 401s, recorded and logged without the key
        httpx.get(gw.url + "/admin/keys", headers={"authorization": f"Bearer {wrong}"})
    gw.spend()  # the ledger is flushed
    secrets_in_clear = {
        "user key x": keys["x"],
        "user key y": keys["y"],
        "admin key": ADMIN_KEY,
        "provider key": PROVIDER_KEY,
    }
    files = [p for p in Path(gw.workdir).rglob("*") if p.is_file() and p.name != "config.yaml"]
    assert any(p.name.startswith("costgate.db") for p in files) and any(p.suffix == ".log" for p in files)
    for path in files:
        data = path.read_bytes()
        for what, secret in secrets_in_clear.items():
            assert secret.encode() not in data, f"{what} in clear in {path.name}"
    # Hashed at rest: each key's row holds its SHA-256, never the key.
    with sqlite3.connect(gw.workdir / "costgate.db") as db:
        hashes = {row[0] for row in db.execute("SELECT key_hash FROM api_keys")}
    for key in keys.values():
        assert hashlib.sha256(key.encode()).hexdigest() in hashes
