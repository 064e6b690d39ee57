"""The dashboard in a real browser: Debian's chromium driven by Playwright (never a downloaded
browser). Sign in, create a team and a key, set a budget, send traffic with the openai SDK,
and watch the spend and the budget bar move.

Set COSTGATE_SCREENSHOT_DIR to keep the pages' screenshots (docs/screenshots is made so).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest

from policies.pricing import format_usd
from tests.support import ADMIN_KEY, GatewayProcess, model, wait_until

pytestmark = pytest.mark.slow  # boots processes: not in the fast lane

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

sync_api = pytest.importorskip("playwright.sync_api")
if not os.access(CHROMIUM, os.X_OK):
    pytest.fail(f"{CHROMIUM} is missing: .ci/run installs Debian's chromium", pytrace=False)


@pytest.fixture(scope="module")
def browser() -> Iterator:
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser, tmp_path: Path) -> Iterator:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(15_000)
    yield context.new_page()
    context.close()


def shoot(page, name: str, tmp_path: Path) -> None:
    target = Path(os.environ.get("COSTGATE_SCREENSHOT_DIR") or tmp_path)
    target.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(target / f"{name}.png"), full_page=True)
    assert (target / f"{name}.png").stat().st_size > 5_000


def sign_in(page, gateway: GatewayProcess) -> None:
    page.goto(gateway.url + "/admin/ui")
    assert page.url.endswith("/admin/ui/login")
    assert page.get_attribute("input[name=admin_key]", "type") == "password"
    page.fill("input[name=admin_key]", ADMIN_KEY)
    page.click("button:has-text('Sign in')")
    page.wait_for_url(gateway.url + "/admin/ui")


def dollars(text: str) -> Decimal:
    return Decimal(re.sub(r"[$,]", "", text.strip()))


def test_sign_in_is_refused_with_a_wrong_key_and_sets_a_strict_cookie(
    page, gateway: GatewayProcess, tmp_path: Path
) -> None:
    page.goto(gateway.url + "/admin/ui/login")
    page.fill("input[name=admin_key]", "sk-cg-admin-wrong")
    page.click("button:has-text('Sign in')")
    assert "not the admin key" in page.inner_text("[role=alert]")
    shoot(page, "login", tmp_path)
    sign_in(page, gateway)
    (cookie,) = page.context.cookies()
    assert cookie["name"] == "costgate_session"
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/admin/ui"
    assert page.evaluate("document.cookie") == ""  # invisible to scripts
    page.click("button:has-text('Sign out')")
    page.wait_for_url(gateway.url + "/admin/ui/login")
    page.goto(gateway.url + "/admin/ui/keys")
    assert page.url.endswith("/admin/ui/login")  # the session ended on the server


def test_team_key_budget_traffic_then_spend_and_budget_bar_move(page, gateway: GatewayProcess, tmp_path: Path) -> None:
    sign_in(page, gateway)
    page.click("nav >> text=Teams & keys")
    page.fill("input[name=name] >> nth=0", "browser-team")
    page.click("button:has-text('Create team')")
    assert "browser-team" in page.inner_text("#teams")

    page.select_option("select[name=team]", "browser-team")
    page.fill("form[action='/admin/ui/keys'] input[name=name]", "web-app")
    page.click("button:has-text('Create key')")
    secret = page.inner_text("#secret-value").strip()
    assert secret.startswith("sk-cg-")
    shoot(page, "keys", tmp_path)
    page.reload()  # a GET: the secret is not shown again
    assert page.locator("#secret-value").count() == 0
    assert secret not in page.content()

    page.click("nav >> text=Budgets")
    page.select_option("select[name=scope]", "team")
    page.fill("input[name=id]", "browser-team")
    page.fill("input[name=amount_usd]", "0.001")
    page.select_option("select[name=period]", "monthly")
    page.click("button:has-text('Set budget')")
    row = page.locator("#budgets tr[data-subject='browser-team']")
    assert dollars(row.locator(".spent-usd").inner_text()) == 0

    client = gateway.client(secret)
    for i in range(3):
        client.chat.completions.create(
            model="large",
            max_tokens=20,  # worst case $0.0002: fits the budget
            messages=[{"role": "user", "content": f"hello dashboard {i}"}],
        )
    spent = next(Decimal(r["cost_usd"]) for r in gateway.spend("team")["rows"] if r["group"] == _team_id(gateway))
    assert spent > 0

    page.reload()
    row = page.locator("#budgets tr[data-subject='browser-team']")
    assert dollars(row.locator(".spent-usd").inner_text()) == spent
    assert float(row.locator(".used-pct").inner_text().rstrip("%")) > 0
    assert row.locator("svg.meter rect.spent").count() == 1  # the bar has a filled segment
    shoot(page, "budgets", tmp_path)

    page.click("nav >> text=Overview")
    spenders = page.inner_text("#spenders")
    assert "browser-team" in spenders
    assert dollars(page.inner_text("#total-spend")) > 0
    shoot(page, "overview", tmp_path)

    for slug in ("spend", "savings", "requests"):
        page.goto(f"{gateway.url}/admin/ui/{slug}")
        shoot(page, slug, tmp_path)
    assert "hello dashboard" not in page.content()  # no prompt text on the requests page
    assert page.locator("#recent tbody tr").count() >= 3


def _team_id(gateway: GatewayProcess) -> str:
    return next(t["id"] for t in gateway.admin("GET", "/admin/teams").json()["data"] if t["name"] == "browser-team")


@pytest.fixture(scope="module")
def keyless_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    """No admin key configured: the gateway generates one and keeps it in its data dir."""
    gw = GatewayProcess({"admin_key": None, "models": []}, tmp_path_factory.mktemp("keyless"))
    yield gw
    gw.stop()


@pytest.fixture(scope="module")
def priced_gateway(tmp_path_factory: pytest.TempPathFactory, fake_upstream) -> Iterator[GatewayProcess]:
    """Models priced to make long amounts: a request of ~10 prompt and ~10 completion tokens costs
    about $0.0000000123456790 on the first and $12,345,679 on the second."""
    api = fake_upstream.url
    gw = GatewayProcess(
        {
            "models": [
                model("tiny-price", "echo-tiny", api, "0.000617283950617284", "0.000617283950617284"),
                model("huge-price", "echo-huge", api, "617283950617.284", "617283950617.284"),
            ]
        },
        tmp_path_factory.mktemp("priced"),
    )
    yield gw
    gw.stop()


def test_the_sign_in_page_says_where_the_generated_admin_key_is(
    page, keyless_gateway: GatewayProcess, tmp_path: Path
) -> None:
    gw = keyless_gateway
    page.goto(gw.url + "/admin/ui/login")
    hint = page.inner_text("#key-hint")
    written = Path(gw.config["data_dir"]) / "admin_key"
    assert str(written) in hint and "COSTGATE_ADMIN_KEY" in hint
    shoot(page, "login-generated-key", tmp_path)
    page.fill("input[name=admin_key]", written.read_text().strip())  # the key found where the page said
    page.click("button:has-text('Sign in')")
    page.wait_for_url(gw.url + "/admin/ui")


def test_the_sign_in_page_of_a_configured_key_names_where_it_was_set(page, gateway: GatewayProcess) -> None:
    page.goto(gateway.url + "/admin/ui/login")
    hint = page.inner_text("#key-hint")
    assert "COSTGATE_ADMIN_KEY" in hint and "admin_key" in hint and "generated" not in hint


def _spend_after(gw: GatewayProcess, before: Decimal) -> Decimal:
    """The total spend once the ledger has the new row (it is written in batches, every 50 ms)."""

    def total() -> Decimal | None:
        now = Decimal(gw.spend("team")["total_usd"])
        return now if now != before else None

    return wait_until(total, timeout=30, interval=0.05, what="the request reaches the ledger")


def _overflows(page, selector: str) -> bool:
    """Whether the element's text is wider than the element, or the element leaves its tile."""
    return page.eval_on_selector(
        selector,
        """el => {
        const tile = el.closest('.tile').getBoundingClientRect(), box = el.getBoundingClientRect();
        return el.scrollWidth > el.clientWidth + 1 || box.right > tile.right + 0.5 || box.left < tile.left - 0.5;
    }""",
    )


@pytest.mark.parametrize("width", [1280, 900, 390])
def test_long_spend_amounts_fit_their_tile(page, priced_gateway: GatewayProcess, tmp_path: Path, width: int) -> None:
    gw = priced_gateway
    page.set_viewport_size({"width": width, "height": 900})
    sign_in(page, gw)
    client = gw.client(gw.new_key(f"tile-team-{width}"))
    for name in ("tiny-price", "huge-price"):
        before = Decimal(gw.spend("team")["total_usd"])
        client.chat.completions.create(model=name, max_tokens=8, messages=[{"role": "user", "content": "tile"}])
        total = _spend_after(gw, before)
        page.reload()
        shown = page.locator("#total-spend")
        assert shown.get_attribute("title") == "$" + format_usd(total)  # the exact amount, on hover
        assert abs(dollars(shown.inner_text()) - total) <= total * Decimal("0.005")  # rounded to 3 digits, not cut
        assert not _overflows(page, "#total-spend"), shown.inner_text()
        # the chart's axis labels ("$5,000,000") start inside the chart, not left of it
        assert page.eval_on_selector_all("svg.chart text.axis", "els => els.every(e => e.getBBox().x >= 0)")
        shoot(page, f"overview-long-amount-{name}-{width}", tmp_path)
