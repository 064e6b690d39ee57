"""POST /v1/feedback through a running gateway, with the official openai SDK as the client: a
wrong hit is purged and labelled for its team, verdicts are idempotent, and no key can report,
read or purge another team's answers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from gateway.storage.db import create_engine
from gateway.storage.verdict_store import FeedbackStore
from policies.answer_verdict import Verdict
from policies.semantic_cache.verifier_calibration import Labelled
from tests.conftest import standard_models
from tests.support import FakeUpstream, GatewayProcess

pytestmark = pytest.mark.slow  # boots processes: not in the fast lane

SEM = {"semantic": True, "max_false_hit_rate": 0.25}


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream) -> Iterator[GatewayProcess]:
    config = {
        "models": standard_models(fake_upstream.url),
        "cascades": [{"name": "auto", "tiers": ["small", "large"], "shadow_rate": 0.0}],
        "cache": {"teams": {"sem": SEM, "other": SEM}},
        "rate_limits": {"teams": {"limited": {"requests_per_minute": 3}}},
    }
    gateway = GatewayProcess(config, tmp_path_factory.mktemp("feedback-gw"))
    yield gateway
    gateway.stop()


@pytest.fixture(scope="module")
def keys(gw: GatewayProcess) -> dict[str, str]:
    return {team: gw.new_key(team) for team in ("sem", "other", "limited")}


def ask(gw: GatewayProcess, key: str, text: str, model: str = "small") -> tuple[str, str, str]:
    """(cache status, request id, answer) of one question."""
    raw = gw.client(key).chat.completions.with_raw_response.create(
        model=model, temperature=0, messages=[{"role": "user", "content": text}]
    )
    return raw.headers["x-costgate-cache"], raw.headers["x-costgate-request-id"], raw.parse().choices[0].message.content


def report(gw: GatewayProcess, key: str, request_id: str, verdict: str = "wrong", **extra: Any) -> dict[str, Any]:
    """The endpoint as an application calls it: the SDK's generic post, the app's own key."""
    return gw.client(key).post(
        "/feedback", body={"request_id": request_id, "verdict": verdict, **extra}, cast_to=object
    )


def post(gw: GatewayProcess, key: str | None, body: Any = None, **kw: Any) -> httpx.Response:
    headers = {"authorization": f"Bearer {key}"} if key else {}
    return httpx.post(gw.url + "/v1/feedback", headers=headers, json=body, timeout=30, **kw)


def team_id(gw: GatewayProcess, name: str) -> str:
    return next(t["id"] for t in gw.admin("GET", "/admin/teams").json()["data"] if t["name"] == name)


async def stored(gw: GatewayProcess) -> FeedbackStore:
    return FeedbackStore(create_engine(gw.config["database_url"]))


def calls(fake: FakeUpstream) -> int:
    return fake.stats().get("echo-small", 0)


async def test_a_wrong_semantic_hit_is_purged_and_kept_as_the_teams_label(gw, keys, fake_upstream) -> None:
    assert ask(gw, keys["sem"], "How do I learn Rust quickly?")[0] == "miss"
    status, request_id, answer = ask(gw, keys["sem"], "How can I learn Rust quickly?")
    assert status == "semantic" and answer == "echo: How do I learn Rust quickly?"
    reply = report(gw, keys["sem"], request_id, comment="that answer was for another question")
    assert reply == {
        "object": "feedback",
        "request_id": request_id,
        "verdict": "wrong",
        "comment": "that answer was for another question",
        "cache": "semantic",
        "model": "small",
        "recorded": "new",
        "purged": True,
        "labelled": True,
        "updated_at": reply["updated_at"],
    }
    before = calls(fake_upstream)
    status, _, answer = ask(gw, keys["sem"], "How can I learn Rust quickly?")
    assert (status, answer) == ("miss", "echo: How can I learn Rust quickly?")
    assert calls(fake_upstream) == before + 1
    store = await stored(gw)
    assert await store.labelled(team_id(gw, "sem")) == [
        Labelled("How can I learn Rust quickly?", "How do I learn Rust quickly?", False)
    ]
    assert await store.labelled(team_id(gw, "other")) == []
    metrics = httpx.get(gw.url + "/metrics").text
    assert 'costgate_cache_reported_false_hits_total{kind="semantic",team="sem"} 1.0' in metrics
    await store.engine.dispose()


def test_a_verdict_counts_once_and_never_purges_a_newer_answer(gw, keys, fake_upstream) -> None:
    key = keys["sem"]
    ask(gw, key, "idempotent: what is a monad")
    status, hit_id, _ = ask(gw, key, "idempotent: what is a monad")
    assert status == "exact"
    first = report(gw, key, hit_id, comment="not a burrito")
    assert first["recorded"] == "new"
    assert ask(gw, key, "idempotent: what is a monad")[0] == "miss"  # purged: answered afresh, and stored
    again = report(gw, key, hit_id)
    assert (again["recorded"], again["purged"]) == ("same", False)
    # nothing was written: the answer shows the verdict as stored, its comment kept
    assert (again["comment"], again["updated_at"]) == ("not a burrito", first["updated_at"])
    assert ask(gw, key, "idempotent: what is a monad")[0] == "exact"  # the new answer survived
    changed = report(gw, key, hit_id, "right")
    assert (changed["recorded"], changed["verdict"], changed["labelled"]) == ("changed", "right", False)
    assert report(gw, key, hit_id, "right")["recorded"] == "same"
    metrics = httpx.get(gw.url + "/metrics").text
    assert 'costgate_cache_reported_false_hits_total{kind="exact",team="sem"} 1.0' in metrics


async def test_another_teams_key_can_neither_report_nor_purge(gw, keys, fake_upstream) -> None:
    ask(gw, keys["sem"], "attack: how do I bake sourdough bread")
    status, victim_id, _ = ask(gw, keys["sem"], "attack: how do I bake sourdough bread")
    assert status == "exact"
    with pytest.raises(openai.NotFoundError) as stolen:
        report(gw, keys["other"], victim_id)
    with pytest.raises(openai.NotFoundError) as unknown:
        report(gw, keys["other"], "req_000000000000000000000000")
    # the same answer as for an id that does not exist: nothing says the request is there
    assert stolen.value.body["code"] == unknown.value.body["code"] == "request_not_found"
    assert stolen.value.body["message"].replace(victim_id, "ID") == unknown.value.body["message"].replace(
        "req_000000000000000000000000", "ID"
    )
    assert ask(gw, keys["sem"], "attack: how do I bake sourdough bread")[0] == "exact"  # not purged
    store = await stored(gw)
    assert victim_id not in await store.verdicts_of([victim_id])
    await store.engine.dispose()
    for key in (None, "sk-cg-not-a-key", keys["sem"] + "x"):
        refused = post(gw, key, {"request_id": victim_id, "verdict": "wrong"})
        assert refused.status_code == 401 and refused.json()["error"]["type"] == "authentication_error"
    assert ask(gw, keys["sem"], "attack: how do I bake sourdough bread")[0] == "exact"


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"request_id": "req_x", "verdict": "meh"}, "verdict"),
        ({"verdict": "wrong"}, "request_id"),
        ({"request_id": "", "verdict": "wrong"}, "request_id"),
        ({"request_id": "r" * 65, "verdict": "wrong"}, "request_id"),
        ({"request_id": "req_x", "verdict": "wrong", "comment": "c" * 2001}, "comment"),
        ({"request_id": "req_x", "verdict": "wrong", "score": 3}, "score"),
        (["req_x", "wrong"], None),
    ],
)
def test_bad_bodies_get_openai_shaped_400s(gw, keys, body, param) -> None:
    refused = post(gw, keys["sem"], body)
    assert refused.status_code == 400, refused.text
    error = refused.json()["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == param


def test_bodies_are_capped_and_must_be_json(gw, keys) -> None:
    huge = post(gw, keys["sem"], {"request_id": "req_x", "verdict": "wrong", "comment": "c" * 100_000})
    assert huge.status_code == 413 and huge.json()["error"]["code"] == "request_too_large"
    garbage = httpx.post(
        gw.url + "/v1/feedback", headers={"authorization": f"Bearer {keys['sem']}"}, content=b"{not json", timeout=30
    )
    assert garbage.status_code == 400 and garbage.json()["error"]["type"] == "invalid_request_error"


def test_feedback_counts_against_the_request_rate(gw, keys) -> None:
    answers = [post(gw, keys["limited"], {"request_id": f"req_{i}", "verdict": "wrong"}) for i in range(4)]
    assert [a.status_code for a in answers] == [404, 404, 404, 429]
    assert answers[-1].json()["error"]["code"] == "rate_limit_exceeded" and "retry-after" in answers[-1].headers


async def test_verdicts_on_answers_that_were_not_hits_are_kept_per_cascade(gw, keys) -> None:
    status, request_id, _ = ask(gw, keys["other"], "cascade: what is 2 + 2", model="auto")
    assert status == "miss"
    reply = report(gw, keys["other"], request_id)
    assert (reply["cache"], reply["purged"], reply["labelled"]) == ("miss", False, False)
    failed = httpx.post(
        gw.url + "/v1/chat/completions",
        headers={"authorization": f"Bearer {keys['other']}"},
        json={"model": "reject", "messages": [{"role": "user", "content": "no"}]},
        timeout=30,
    )
    with pytest.raises(openai.NotFoundError):  # a failed request served no answer to judge
        report(gw, keys["other"], failed.headers["x-costgate-request-id"])
    store = await stored(gw)
    counts = await store.counts(team_id=team_id(gw, "other"))
    assert [(c.requested_model, c.cache_status, c.verdict, c.count) for c in counts] == [
        ("auto", "miss", Verdict.WRONG, 1)
    ]
    rows = await store.verdicts(requested_model="auto")
    assert [(r.request.request_id, r.request.served_model, r.verdict) for r in rows] == [
        (request_id, reply["model"], Verdict.WRONG)
    ]
    assert reply["model"] in ("small", "large") and rows[0].reported_by.startswith("key_")
    await store.engine.dispose()


def test_the_admin_reports_for_any_team(gw, keys) -> None:
    ask(gw, keys["other"], "admin: what is a lemma")
    status, hit_id, _ = ask(gw, keys["other"], "admin: what is a lemma")
    assert status == "exact"
    reply = gw.admin("POST", "/admin/feedback", json={"request_id": hit_id, "verdict": "wrong"})
    assert reply.status_code == 200, reply.text
    assert (reply.json()["purged"], reply.json()["team_id"]) == (True, team_id(gw, "other"))
    assert ask(gw, keys["other"], "admin: what is a lemma")[0] == "miss"
    assert post(gw, gw.config["admin_key"], {"request_id": hit_id, "verdict": "wrong"}).status_code == 401


def test_admin_cache_teams_counts_hits_savings_and_reported_false_hits(gw, keys) -> None:
    key = gw.new_key("stats")
    ask(gw, key, "stats: what is a functor")  # miss
    _, first, _ = ask(gw, key, "stats: what is a functor")
    _, second, _ = ask(gw, key, "stats: what is a functor")
    assert gw.admin("POST", "/admin/feedback", json={"request_id": first, "verdict": "right"}).status_code == 200
    assert gw.admin("POST", "/admin/feedback", json={"request_id": second, "verdict": "wrong"}).status_code == 200
    teams = gw.admin("GET", "/admin/cache/teams?days=1")
    assert teams.status_code == 200, teams.text
    row = next(t for t in teams.json()["data"] if t["team"] == "stats")
    assert (row["requests"], row["hits"]) == (3, {"exact": 2, "semantic": 0})
    assert (row["hit_rate"], row["exact_hit_rate"], row["semantic_hit_rate"]) == (2 / 3, 2 / 3, 0.0)
    assert float(row["saved_usd"]) > 0
    assert row["reported_false_hits"] == {"exact": 1, "semantic": 0}
    assert row["reported_right_hits"] == {"exact": 1, "semantic": 0}
    assert row["reported_false_hit_rate"] == 0.5
    hits = gw.admin("GET", "/admin/cache/hits?team=stats").json()["data"]
    assert [(h["request_id"], h["cache"], h["verdict"]) for h in hits] == [
        (second, "exact", "wrong"),
        (first, "exact", "right"),
    ]
    assert gw.admin("GET", "/admin/cache/hits?team=nobody").status_code == 404
    assert gw.admin("GET", "/admin/cache/teams?days=0").status_code == 400
    assert httpx.get(gw.url + "/admin/cache/teams").status_code == 401
