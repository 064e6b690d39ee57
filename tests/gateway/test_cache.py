"""The response cache through a running gateway, with the official openai SDK."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal

import httpx
import openai
import pytest

from tests.conftest import standard_models
from tests.support import FakeUpstream, GatewayProcess

pytestmark = pytest.mark.slow  # boots processes: not in the fast lane

COLD = {"temperature": 0}


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream) -> Iterator[GatewayProcess]:
    config = {
        "models": standard_models(fake_upstream.url),
        "cache": {"teams": {"sem": {"semantic": True, "max_false_hit_rate": 0.25}, "hot": {"max_temperature": 2.0}}},
    }
    gateway = GatewayProcess(config, tmp_path_factory.mktemp("cache-gw"))
    yield gateway
    gateway.stop()


@pytest.fixture(scope="module")
def keys(gw: GatewayProcess) -> dict[str, str]:
    return {team: gw.new_key(team) for team in ("alpha", "beta", "sem", "hot")}


def ask(gw: GatewayProcess, key: str, text: str, model: str = "small", headers: dict | None = None, **kw):
    raw = gw.client(key).chat.completions.with_raw_response.create(
        model=model, messages=[{"role": "user", "content": text}], extra_headers=headers or {}, **{**COLD, **kw}
    )
    return raw, raw.parse()


def calls(fake: FakeUpstream, upstream: str = "echo-small") -> int:
    return fake.stats().get(upstream, 0)


def test_exact_hit_costs_nothing_and_records_the_saving(gw, keys, fake_upstream) -> None:
    before = calls(fake_upstream)
    first_raw, first = ask(gw, keys["alpha"], "exact: what is the boiling point of water")
    second_raw, second = ask(gw, keys["alpha"], "exact: what is the boiling point of water")
    assert calls(fake_upstream) == before + 1
    assert first_raw.headers["x-costgate-cache"] == "miss"
    assert Decimal(first_raw.headers["x-costgate-cost-usd"]) > 0
    assert second_raw.headers["x-costgate-cache"] == "exact"
    assert Decimal(second_raw.headers["x-costgate-cost-usd"]) == 0
    assert second_raw.headers["x-costgate-model"] == "small"
    assert second.choices[0].message.content == first.choices[0].message.content
    assert second.usage.completion_tokens == first.usage.completion_tokens
    assert second.usage.model_extra["cost_usd"] == "0"
    team_id = next(t["id"] for t in gw.admin("GET", "/admin/teams").json()["data"] if t["name"] == "alpha")
    row = next(r for r in gw.spend("team")["rows"] if r["group"] == team_id)
    assert Decimal(row["saved_usd"]) == Decimal(first_raw.headers["x-costgate-cost-usd"])
    assert Decimal(row["cost_usd"]) == Decimal(first_raw.headers["x-costgate-cost-usd"])


def test_answers_never_cross_teams(gw, keys, fake_upstream) -> None:
    ask(gw, keys["alpha"], "isolation: name a prime number")
    before = calls(fake_upstream)
    raw, _ = ask(gw, keys["beta"], "isolation: name a prime number")
    assert raw.headers["x-costgate-cache"] == "miss"
    assert calls(fake_upstream) == before + 1


def test_sampled_requests_are_not_cached_unless_the_team_opts_in(gw, keys, fake_upstream) -> None:
    for team, expected in (("alpha", "miss"), ("hot", "exact")):
        ask(gw, keys[team], "sampled: write a haiku", temperature=0.9)
        raw, _ = ask(gw, keys[team], "sampled: write a haiku", temperature=0.9)
        assert raw.headers["x-costgate-cache"] == expected, team


def unset_temperature(gw: GatewayProcess, key: str, text: str, headers: dict | None = None):
    """A request as most applications send it: no temperature at all."""
    raw = gw.client(key).chat.completions.with_raw_response.create(
        model="small", messages=[{"role": "user", "content": text}], extra_headers=headers or {}
    )
    return raw.headers["x-costgate-cache"], raw.parse().choices[0].message.content


def test_a_request_without_temperature_is_cached_and_can_opt_out(gw, keys, fake_upstream) -> None:
    first = unset_temperature(gw, keys["alpha"], "unset: name a river")
    before = calls(fake_upstream)
    assert unset_temperature(gw, keys["alpha"], "unset: name a river") == ("exact", first[1])
    assert calls(fake_upstream) == before
    assert unset_temperature(gw, keys["alpha"], "unset: name a river", {"x-costgate-cache": "no-cache"})[0] == "miss"
    assert calls(fake_upstream) == before + 1
    raw, _ = ask(gw, keys["alpha"], "unset: name a river", temperature=1)  # explicit, above the limit of 0
    assert raw.headers["x-costgate-cache"] == "miss"
    assert unset_temperature(gw, keys["sem"], "unset: How do I learn Rust quickly?")[0] == "miss"
    assert unset_temperature(gw, keys["sem"], "unset: How can I learn Rust quickly?")[0] == "semantic"


def test_no_cache_skips_reads_and_no_store_skips_writes(gw, keys, fake_upstream) -> None:
    ask(gw, keys["alpha"], "controls: what is a lemma")
    before = calls(fake_upstream)
    raw, _ = ask(gw, keys["alpha"], "controls: what is a lemma", headers={"x-costgate-cache": "no-cache"})
    assert raw.headers["x-costgate-cache"] == "miss" and calls(fake_upstream) == before + 1
    ask(gw, keys["alpha"], "controls: not kept", headers={"x-costgate-cache": "no-store"})
    raw, _ = ask(gw, keys["alpha"], "controls: not kept")
    assert raw.headers["x-costgate-cache"] == "miss"
    raw, _ = ask(gw, keys["alpha"], "controls: not kept", headers={"x-costgate-cache": "no-cache, no-store"})
    assert raw.headers["x-costgate-cache"] == "miss"
    raw, _ = ask(gw, keys["alpha"], "controls: not kept")
    assert raw.headers["x-costgate-cache"] == "exact"  # the plain request before did store it


def test_errors_are_never_cached(gw, keys, fake_upstream) -> None:
    for _ in range(2):
        with pytest.raises(openai.BadRequestError):
            ask(gw, keys["alpha"], "errors: please fail", model="reject")
    assert fake_upstream.stats().get("reject", 0) >= 2
    raw = httpx.post(
        gw.url + "/v1/chat/completions",
        headers={"authorization": f"Bearer {keys['alpha']}"},
        json={"model": "reject", "temperature": 0, "messages": [{"role": "user", "content": "errors: please fail"}]},
    )
    assert raw.status_code == 400 and raw.headers["x-costgate-cache"] == "miss"


def test_streaming_hit_is_replayed_with_usage(gw, keys, fake_upstream) -> None:
    _, first = ask(gw, keys["alpha"], "stream: tell me about the moon")
    stream = gw.client(keys["alpha"]).chat.completions.with_raw_response.create(
        model="small",
        stream=True,
        stream_options={"include_usage": True},
        temperature=0,
        messages=[{"role": "user", "content": "stream: tell me about the moon"}],
    )
    assert stream.headers["x-costgate-cache"] == "exact"
    assert stream.headers["x-costgate-cost-usd"] == "0"
    chunks = list(stream.parse())
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == first.choices[0].message.content
    assert chunks[-2].choices[0].finish_reason == "stop"
    usage = chunks[-1].usage
    assert not chunks[-1].choices and usage.completion_tokens == first.usage.completion_tokens
    assert usage.model_extra["cost_usd"] == "0"


def test_streamed_miss_is_stored_and_served_whole(gw, keys) -> None:
    chunks = list(
        gw.client(keys["alpha"]).chat.completions.create(
            model="small", stream=True, temperature=0, messages=[{"role": "user", "content": "stream: count the stars"}]
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert all(c.usage is None for c in chunks)  # not asked for: none replayed either
    raw, hit = ask(gw, keys["alpha"], "stream: count the stars")
    assert raw.headers["x-costgate-cache"] == "exact" and hit.choices[0].message.content == text


def test_semantic_hit_and_near_miss(gw, keys, fake_upstream) -> None:
    _, stored = ask(gw, keys["sem"], "How do I learn Python quickly?")
    raw, hit = ask(gw, keys["sem"], "How can I learn Python quickly?")
    assert raw.headers["x-costgate-cache"] == "semantic"
    assert Decimal(raw.headers["x-costgate-cost-usd"]) == 0
    assert hit.choices[0].message.content == stored.choices[0].message.content
    ask(gw, keys["sem"], "How do I lose 5 kg?")
    raw, answer = ask(gw, keys["sem"], "How do I lose 50 kg?")
    assert raw.headers["x-costgate-cache"] == "miss" and "50 kg" in answer.choices[0].message.content
    raw, _ = ask(gw, keys["alpha"], "How can I learn Python quickly?")  # alpha has no semantic cache
    assert raw.headers["x-costgate-cache"] == "miss"


def test_admin_purge_by_team_and_metrics(gw, keys) -> None:
    ask(gw, keys["beta"], "purge: keep me")
    ask(gw, keys["alpha"], "purge: drop me")
    assert gw.admin("DELETE", "/admin/cache").status_code == 400
    purged = gw.admin("DELETE", "/admin/cache?team=alpha")
    assert purged.status_code == 200 and purged.json()["removed"] >= 1
    assert gw.admin("DELETE", "/admin/cache?team=nobody").status_code == 404
    raw, _ = ask(gw, keys["alpha"], "purge: drop me")
    assert raw.headers["x-costgate-cache"] == "miss"
    raw, _ = ask(gw, keys["beta"], "purge: keep me")
    assert raw.headers["x-costgate-cache"] == "exact"
    metrics = httpx.get(gw.url + "/metrics").text
    assert 'costgate_cache_lookups_total{kind="exact",result="hit",team="beta"}' in metrics
    assert "costgate_cache_saved_usd_total" in metrics
    assert gw.admin("GET", "/admin/cache").json()["entries"] >= 1


def test_admin_cache_shows_each_teams_own_settings(gw) -> None:
    view = gw.admin("GET", "/admin/cache").json()
    assert (view["exact"], view["semantic"], view["max_temperature"], view["verifier"]) == (True, False, 0.0, "shipped")
    sem, hot = view["teams"]["sem"], view["teams"]["hot"]
    assert (sem["semantic"], sem["max_false_hit_rate"], sem["max_temperature"]) == (True, 0.25, 0.0)
    assert (hot["semantic"], hot["max_temperature"], hot["max_false_hit_rate"]) == (
        False,
        2.0,
        view["max_false_hit_rate"],
    )
    assert "alpha" not in view["teams"]  # a team without overrides gets the global settings
