"""The dashboard's cascades page in a real browser: per cascade, the scorer's AUC, the
threshold, the quality kept and its bound, the escalation rate, the dollars saved and the
refits, as /admin/cascades says them, after traffic through a fake upstream."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from gateway.dashboard.pages import pct, usd_short
from tests.gateway.dashboard.test_browser import browser, page, shoot, sign_in  # noqa: F401 (fixtures)
from tests.gateway.routing.test_learning import QUESTIONS, RECORDS, scorer_file
from tests.support import GatewayProcess, model, recorded_upstream, wait_until

pytestmark = pytest.mark.slow  # boots processes: not in the fast lane


@pytest.fixture(scope="module")
def cascaded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    fake = recorded_upstream(tmp_path_factory.mktemp("cascade-page-fake"), RECORDS)
    workdir = tmp_path_factory.mktemp("gw-cascade-page")
    learned = {
        "name": "learned-c",
        "tiers": ["weak", "strong"],
        "scorer": "learned:" + scorer_file(workdir / "scorer.json", inverted=False),
        "quality_target": 0.9,
        "min_samples": 12,
        "last_tier_quality": 1.0,
        "shadow_rate": 0.0,
        "refit_every": 10,
    }
    config = {
        "models": [
            model("weak", "learn-weak", fake.url, "0.6", "0.6", max_retries=0),
            model("strong", "learn-strong", fake.url, "10", "30", max_retries=0),
        ],
        "cascades": [learned, {"name": "rules-c", "tiers": ["weak", "strong"], "scorer": "rules"}],
        "cache": {"exact": {"enabled": False}},
    }
    gw = GatewayProcess(config, workdir)
    yield gw
    gw.stop()
    fake.stop()


def test_the_cascades_page_shows_what_the_admin_api_says(page, cascaded: GatewayProcess, tmp_path: Path) -> None:  # noqa: F811
    gw = cascaded
    client = httpx.Client(base_url=gw.url, headers={"authorization": f"Bearer {gw.new_key('page-team')}"}, timeout=30)
    for i in range(24):  # 12 learning (escalated), then the right answers accepted
        body = {"model": "learned-c", "messages": [{"role": "user", "content": QUESTIONS[i % len(QUESTIONS)]}]}
        assert client.post("/v1/chat/completions", json=body).status_code == 200

    def settled() -> list[dict] | None:
        """A refit tried and none running, and nothing moving for half a second: the samples of
        the last requests are stored after their answers, and may start a second refit."""
        data = gw.admin("GET", "/admin/cascades").json()["data"]
        learned = next(c for c in data if c["name"] == "learned-c")
        if learned["refit"]["tried"] < 1 or learned["refit"]["running"]:
            return None
        time.sleep(0.5)
        return data if gw.admin("GET", "/admin/cascades").json()["data"] == data else None

    data = wait_until(settled, timeout=30, interval=0.05, what="a refit")
    sign_in(page, gw)
    page.click("nav >> text=Cascades")
    page.wait_for_url(gw.url + "/admin/ui/cascades")
    shoot(page, "cascades", tmp_path)
    assert page.locator("section.cascade").count() == 2
    for c in data:
        card = page.locator(f"section.cascade[data-cascade='{c['name']}']")

        def text(cls: str, card=card) -> str:
            return card.locator(f".{cls}").inner_text().strip()

        assert text("threshold") == ("escalate all" if c["threshold"] is None else f"{c['threshold']:.2f}")
        assert text("scorer-auc") == ("not yet" if c["scorer_auc"] is None else f"{c['scorer_auc']:.3f}")
        assert text("quality") == pct(c["quality"]) and text("quality-bound") == pct(c["quality_lower_bound"])
        assert text("escalation") == ("—" if c["escalation_rate"] is None else pct(c["escalation_rate"]))
        assert text("saved") == usd_short(c["saved_usd"])
        assert card.locator(".saved").get_attribute("title") == "$" + c["saved_usd"]
        assert c["reason"] in text("reason") and text("scorer") == c["scorer"]
        if c["refit"]["enabled"]:
            assert text("refits") == f"{c['refit']['replaced']} / {c['refit']['tried']}"
            assert f"scorer in use: {c['refit']['scorer_in_use']}" in text("refit-reason")
            if c["refit"]["last"] is not None:  # rules-c has too few samples to try an upgrade
                assert c["refit"]["last"]["reason"] in text("refit-reason")
        else:
            assert text("refits") == "off" and c["refit"]["why"] in text("refit-reason")
    learned = next(c for c in data if c["name"] == "learned-c")
    assert learned["answered"] == 24 and learned["threshold"] is not None and learned["scorer_auc"] == 1.0
    assert learned["escalation_rate"] < 1 and float(learned["saved_usd"]) > 0  # the right answers came from weak
