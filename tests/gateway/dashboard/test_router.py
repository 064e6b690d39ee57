"""The dashboard's sign-in, sessions and CSRF checks, over HTTP against a running gateway."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.support import ADMIN_KEY, GatewayProcess

pytestmark = pytest.mark.slow  # boots processes: not in the fast lane


def signed_in(gateway: GatewayProcess) -> tuple[httpx.Client, str]:
    client = httpx.Client(base_url=gateway.url, timeout=30)
    response = client.post("/admin/ui/login", data={"admin_key": ADMIN_KEY})
    assert response.status_code == 303 and response.headers["location"] == "/admin/ui"
    page = client.get("/admin/ui/keys")
    return client, re.search(r'name="csrf" value="([0-9a-f]{64})"', page.text).group(1)


def team_names(gateway: GatewayProcess) -> set[str]:
    return {t["name"] for t in gateway.admin("GET", "/admin/teams").json()["data"]}


@pytest.mark.parametrize("path", ["", "/spend", "/keys", "/budgets", "/savings", "/cascades", "/requests"])
def test_pages_need_a_session(gateway: GatewayProcess, path: str) -> None:
    for cookies in ({}, {"costgate_session": "made-up"}):
        response = httpx.get(gateway.url + "/admin/ui" + path, cookies=cookies)
        assert response.status_code == 303 and response.headers["location"] == "/admin/ui/login"


def test_the_admin_bearer_key_is_not_a_dashboard_session(gateway: GatewayProcess) -> None:
    response = httpx.get(gateway.url + "/admin/ui", headers={"authorization": f"Bearer {ADMIN_KEY}"})
    assert response.status_code == 303


def test_wrong_key_gets_no_cookie(gateway: GatewayProcess) -> None:
    response = httpx.post(gateway.url + "/admin/ui/login", data={"admin_key": ADMIN_KEY + "x"})
    assert response.status_code == 401 and "set-cookie" not in response.headers


def test_cookie_flags_and_security_headers(gateway: GatewayProcess) -> None:
    response = httpx.post(gateway.url + "/admin/ui/login", data={"admin_key": ADMIN_KEY})
    cookie = response.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie and "path=/admin/ui" in cookie
    client, _ = signed_in(gateway)
    page = client.get("/admin/ui")
    assert page.status_code == 200
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["x-frame-options"] == "DENY" and page.headers["cache-control"] == "no-store"
    assert "<script>" not in page.text and "http" not in page.text.split("<main>")[0].replace("http-equiv", "")


def test_behind_a_tls_proxy_the_cookie_is_secure_and_the_public_origin_is_accepted(gateway: GatewayProcess) -> None:
    proxy = {
        "x-forwarded-proto": "https",
        "x-forwarded-host": "costgate.example.com",
        "origin": "https://costgate.example.com",
    }
    response = httpx.post(gateway.url + "/admin/ui/login", data={"admin_key": ADMIN_KEY}, headers=proxy)
    assert response.status_code == 303 and "secure" in response.headers["set-cookie"].lower()
    plain = httpx.post(gateway.url + "/admin/ui/login", data={"admin_key": ADMIN_KEY})
    assert "secure" not in plain.headers["set-cookie"].lower()
    other = httpx.post(
        gateway.url + "/admin/ui/login",
        data={"admin_key": ADMIN_KEY},
        headers={**proxy, "origin": "https://evil.example"},
    )
    assert other.status_code == 401 and "set-cookie" not in other.headers


@pytest.mark.parametrize("forge", ["no token", "other session's token", "foreign origin", "null origin"])
def test_writes_without_a_valid_token_and_origin_are_refused(gateway: GatewayProcess, forge: str) -> None:
    client, csrf = signed_in(gateway)
    _, other_csrf = signed_in(gateway)
    name = f"forged-{forge.replace(' ', '-').replace(chr(39), '')}"
    data, headers = {"name": name, "csrf": csrf}, {}
    if forge == "no token":
        del data["csrf"]
    elif forge == "other session's token":
        data["csrf"] = other_csrf
    elif forge == "foreign origin":
        headers["origin"] = "https://evil.example"
    else:
        headers["origin"] = "null"
    response = client.post("/admin/ui/teams", data=data, headers=headers)
    assert response.status_code == 403
    assert name not in team_names(gateway)
    assert (
        client.post("/admin/ui/teams", data={"name": name, "csrf": csrf}, headers={"origin": gateway.url}).status_code
        == 303
    )
    assert name in team_names(gateway)


def test_token_in_header_works_and_logout_ends_the_session_everywhere(gateway: GatewayProcess) -> None:
    client, csrf = signed_in(gateway)
    assert (
        client.post("/admin/ui/teams", data={"name": "header-token"}, headers={"x-csrf-token": csrf}).status_code == 303
    )
    cookie = client.cookies["costgate_session"]
    assert client.post("/admin/ui/logout", data={"csrf": csrf}).status_code == 303
    replay = httpx.get(gateway.url + "/admin/ui", cookies={"costgate_session": cookie})
    assert replay.status_code == 303  # the old cookie is dead on the server, not just deleted in the browser


def test_key_secret_is_shown_once_and_works_then_rotate_and_revoke(gateway: GatewayProcess) -> None:
    client, csrf = signed_in(gateway)
    client.post("/admin/ui/teams", data={"name": "once", "csrf": csrf})
    created = client.post("/admin/ui/keys", data={"team": "once", "name": "k", "plan": "pro", "csrf": csrf})
    secret = re.search(r'id="secret-value">(sk-cg-[\w-]+)<', created.text).group(1)
    key_id = re.search(r"Key id (key_\w+)", created.text).group(1)
    assert created.headers["cache-control"] == "no-store"
    assert secret not in client.get("/admin/ui/keys").text
    assert gateway.client(secret).models.list().data
    rotated = client.post(f"/admin/ui/keys/{key_id}/rotate", data={"csrf": csrf})
    new_secret = re.search(r'id="secret-value">(sk-cg-[\w-]+)<', rotated.text).group(1)
    assert new_secret != secret and gateway.client(new_secret).models.list().data
    assert client.post(f"/admin/ui/keys/{key_id}/revoke", data={"csrf": csrf}).status_code == 303
    assert httpx.get(gateway.url + "/v1/models", headers={"authorization": f"Bearer {new_secret}"}).status_code == 401
    again = client.post(f"/admin/ui/keys/{key_id}/revoke", data={"csrf": csrf})
    assert again.status_code == 404 and "no active key" in again.text


def test_bad_input_is_shown_not_crashed(gateway: GatewayProcess) -> None:
    client, csrf = signed_in(gateway)
    assert client.post("/admin/ui/keys", data={"team": "no-such-team", "csrf": csrf}).status_code == 404
    assert (
        client.post(
            "/admin/ui/budgets", data={"scope": "team", "id": "x", "amount_usd": "lots", "csrf": csrf}
        ).status_code
        == 400
    )
    assert client.get("/admin/ui/static/../router.py").status_code == 404
    assert client.get("/admin/ui?days=abc").status_code == 200
