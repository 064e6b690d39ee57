"""The dashboard's Cache page in a real browser (Debian's chromium through Playwright): per team
hit rates, savings and reported false hits, and the *Report wrong* button on a served hit, which
purges the entry that served it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import standard_models
from tests.gateway.dashboard.test_browser import browser, dollars, page, shoot, sign_in  # noqa: F401 (fixtures)
from tests.gateway.dashboard.test_router import signed_in
from tests.support import FakeUpstream, GatewayProcess

pytestmark = pytest.mark.slow  # boots processes: not in the fast lane

QUESTION = "How do I learn Rust quickly?"
NEAR = "How can I learn Rust quickly?"


@pytest.fixture(scope="module")
def cache_gateway(tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream) -> Iterator[GatewayProcess]:
    gw = GatewayProcess(
        {
            "models": standard_models(fake_upstream.url),
            "cache": {"teams": {"rust-team": {"semantic": True, "max_false_hit_rate": 0.25}}},
        },
        tmp_path_factory.mktemp("cache-dashboard"),
    )
    yield gw
    gw.stop()


def ask(gw: GatewayProcess, key: str, text: str) -> tuple[str, str]:
    raw = gw.client(key).chat.completions.with_raw_response.create(
        model="small", temperature=0, messages=[{"role": "user", "content": text}]
    )
    return raw.headers["x-costgate-cache"], raw.headers["x-costgate-request-id"]


def test_report_wrong_purges_the_hit_and_counts_it(page, cache_gateway: GatewayProcess, tmp_path: Path) -> None:  # noqa: F811
    gw = cache_gateway
    key = gw.new_key("rust-team")
    assert ask(gw, key, QUESTION)[0] == "miss"
    assert ask(gw, key, QUESTION)[0] == "exact"
    status, semantic_id = ask(gw, key, NEAR)
    assert status == "semantic"

    sign_in(page, gw)
    page.click("nav >> text=Cache")
    page.wait_for_url(gw.url + "/admin/ui/cache")
    row = page.locator("#cache-teams tr[data-team='rust-team']")
    assert row.locator(".hit-rate").inner_text() == "66.7%"  # 2 hits of 3 answered requests
    assert row.locator(".exact").inner_text() == "33.3% (1)" and row.locator(".semantic").inner_text() == "33.3% (1)"
    assert dollars(row.locator(".saved-usd").inner_text()) > 0
    assert row.locator(".false-hits").inner_text() == "0"
    hit = page.locator(f"#cache-hits tr[data-request-id='{semantic_id}']")
    assert hit.locator(".verdict").inner_text() == ""
    shoot(page, "cache", tmp_path)

    page.once("dialog", lambda dialog: dialog.accept())  # the button asks before it reports
    hit.locator("button:has-text('Report wrong')").click()
    page.wait_for_selector("#reported")
    assert "purged" in page.inner_text("#reported") and "labelled negative" in page.inner_text("#reported")
    row = page.locator("#cache-teams tr[data-team='rust-team']")
    assert row.locator(".false-hits").inner_text() == "1"
    hit = page.locator(f"#cache-hits tr[data-request-id='{semantic_id}']")
    assert hit.locator(".verdict").inner_text() == "wrong" and hit.locator("button").count() == 0
    shoot(page, "cache-reported", tmp_path)

    assert ask(gw, key, NEAR)[0] == "miss"  # the entry that served it is gone: answered afresh
    page.reload()  # a GET: the report is not posted again
    assert page.locator("#reported").count() == 0
    assert page.locator("#cache-teams tr[data-team='rust-team'] .false-hits").inner_text() == "1"


def test_a_report_needs_the_sessions_csrf_token(cache_gateway: GatewayProcess) -> None:
    gw = cache_gateway
    key = gw.new_key("rust-team")
    ask(gw, key, "csrf: what is a borrow checker")
    status, hit_id = ask(gw, key, "csrf: what is a borrow checker")
    assert status == "exact"
    assert httpx.get(gw.url + "/admin/ui/cache").headers["location"] == "/admin/ui/login"  # no session
    assert httpx.post(gw.url + "/admin/ui/cache", data={"request_id": hit_id}).status_code == 303
    client, csrf = signed_in(gw)
    for forged in ({"request_id": hit_id}, {"request_id": hit_id, "csrf": "f" * 64}):
        assert client.post("/admin/ui/cache", data=forged).status_code == 403
        assert ask(gw, key, "csrf: what is a borrow checker")[0] == "exact"  # nothing purged
    bad = client.post("/admin/ui/cache", data={"request_id": "x'><script>", "csrf": csrf})
    assert bad.status_code == 400 and "not a request id" in bad.text
    done = client.post("/admin/ui/cache", data={"request_id": hit_id, "csrf": csrf})
    assert done.status_code == 200 and 'id="reported"' in done.text
    assert ask(gw, key, "csrf: what is a borrow checker")[0] == "miss"
