"""Key lifecycle through the admin API, and what each key may do."""

from __future__ import annotations

import time

import httpx
import openai
import pytest

from tests.support import GatewayProcess, wait_until

pytestmark = pytest.mark.slow  # boots processes: not in the fast lane

HI = [{"role": "user", "content": "hi"}]


def test_key_is_shown_once_and_stored_hashed(gateway: GatewayProcess) -> None:
    secret = gateway.new_key("team-keys")
    assert secret.startswith("sk-cg-") and len(secret) >= 6 + 43  # 32 random bytes, base64url
    listed = gateway.admin("GET", "/admin/keys").json()["data"]
    assert secret not in str(listed)
    db = (gateway.workdir / "costgate.db").read_bytes()
    assert secret.encode() not in db


def test_revoked_key_stops_working(gateway: GatewayProcess) -> None:
    secret = gateway.new_key("team-keys")
    client = gateway.client(secret)
    client.chat.completions.create(model="small", messages=HI)
    key_id = next(k["id"] for k in gateway.admin("GET", "/admin/keys").json()["data"] if secret.startswith(k["prefix"]))
    assert gateway.admin("DELETE", f"/admin/keys/{key_id}").status_code == 200
    with pytest.raises(openai.AuthenticationError):
        client.chat.completions.create(model="small", messages=HI)
    assert gateway.admin("DELETE", f"/admin/keys/{key_id}").status_code == 404


def test_rotated_key_replaces_the_old_secret(gateway: GatewayProcess) -> None:
    old = gateway.new_key("team-keys")
    key_id = next(k["id"] for k in gateway.admin("GET", "/admin/keys").json()["data"] if old.startswith(k["prefix"]))
    rotated = gateway.admin("POST", f"/admin/keys/{key_id}/rotate").json()
    assert rotated["id"] == key_id and rotated["key"] != old
    with pytest.raises(openai.AuthenticationError):
        gateway.client(old).chat.completions.create(model="small", messages=HI)
    assert (
        gateway.client(rotated["key"]).chat.completions.create(model="small", messages=HI).choices[0].message.content
        == "echo: hi"
    )


def test_expired_key_is_refused(gateway: GatewayProcess) -> None:
    expires_at = time.time() + 1.0
    secret = gateway.new_key("team-keys", expires_at=expires_at)
    gateway.client(secret).chat.completions.create(model="small", messages=HI)

    def refused() -> openai.AuthenticationError | None:
        try:
            gateway.client(secret).chat.completions.create(model="small", messages=HI)
        except openai.AuthenticationError as err:
            return err
        return None

    err = wait_until(refused, timeout=30, interval=0.05, what="the key expires")
    assert time.time() >= expires_at  # refused for its expiry, not earlier
    assert err.body["code"] == "expired_api_key"


def test_model_allowlist(gateway: GatewayProcess) -> None:
    secret = gateway.new_key("team-keys", models=["small"])
    client = gateway.client(secret)
    assert client.chat.completions.create(model="small", messages=HI).choices[0].message.content == "echo: hi"
    with pytest.raises(openai.PermissionDeniedError) as err:
        client.chat.completions.create(model="large", messages=HI)
    assert err.value.status_code == 403 and err.value.body["type"] == "permission_error"
    assert {m.id for m in client.models.list()} == {"small"}


def test_unknown_model_is_404(gateway: GatewayProcess, key: str) -> None:
    with pytest.raises(openai.NotFoundError) as err:
        gateway.client(key).chat.completions.create(model="no-such-model", messages=HI)
    assert err.value.body["code"] == "model_not_found"


def test_key_for_unknown_model_or_team_is_refused(gateway: GatewayProcess) -> None:
    assert gateway.admin("POST", "/admin/keys", json={"team": "no-such-team"}).status_code == 404
    gateway.admin("POST", "/admin/teams", json={"name": "team-x"})
    bad = gateway.admin("POST", "/admin/keys", json={"team": "team-x", "models": ["nope"]})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "models"


@pytest.mark.parametrize("auth", [None, "Bearer wrong", "Basic abc", "Bearer sk-cg-user-key"])
def test_admin_routes_refuse_anything_but_the_admin_key(gateway: GatewayProcess, auth: str | None) -> None:
    headers = {"authorization": auth} if auth else {}
    for method, path in [
        ("GET", "/admin/teams"),
        ("POST", "/admin/teams"),
        ("GET", "/admin/keys"),
        ("GET", "/admin/spend"),
    ]:
        response = httpx.request(method, gateway.url + path, headers=headers, json={"name": "z"})
        assert response.status_code == 401
        assert response.json()["error"]["type"] == "authentication_error"


def test_user_key_is_not_an_admin_key(gateway: GatewayProcess, key: str) -> None:
    response = httpx.get(gateway.url + "/admin/teams", headers={"authorization": f"Bearer {key}"})
    assert response.status_code == 401


def test_duplicate_team_is_refused(gateway: GatewayProcess) -> None:
    gateway.admin("POST", "/admin/teams", json={"name": "dup"})
    again = gateway.admin("POST", "/admin/teams", json={"name": "dup"})
    assert again.status_code == 400 and again.json()["error"]["code"] == "team_exists"
