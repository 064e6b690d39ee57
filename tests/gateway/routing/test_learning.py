"""A cascade learns from its own traffic, through a running gateway: its learned scorer is
refitted from the samples and replaced only when the candidate ranks held-back samples better;
/admin/cascades shows the scorer's AUC, the threshold, the quality estimate with its bound,
escalation and the dollars saved, exactly as the calls that were made add up."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import httpx
import numpy as np
import pytest

from policies.pricing import Price, Usage, cost_of
from policies.scorers import Scored
from policies.scorers.answer_features import features
from policies.scorers.training import Matrix, train_matrix
from tests.support import FakeUpstream, GatewayProcess, model, recorded_upstream, wait_until

pytestmark = pytest.mark.slow  # boots processes: not in the fast lane

WEAK, STRONG = "learn-weak", "learn-strong"
RIGHT = [("What is 3 + 4?", "3 + 4 = 7\n#### 7"), ("What is 6 * 7?", "6 * 7 = 42\n#### 42")]
RIGHT += [("What is 10 - 3?", "10 - 3 = 7\n#### 7")]
WRONG = [("What is 5 + 5?", "5 + 5 = 11\n#### 11", "#### 10"), ("What is 9 * 3?", "9 * 3 = 28\n#### 28", "#### 27")]
WRONG += [("What is 8 - 2?", "8 - 2 = 5\n#### 5", "#### 6")]
QUESTIONS = [q for pair in zip(RIGHT, WRONG) for q in (pair[0][0], pair[1][0])]  # alternating
RECORDS = [{"prompt": q, "answers": {WEAK: a, STRONG: a.split("\n")[-1]}} for q, a in RIGHT]
RECORDS += [{"prompt": q, "answers": {WEAK: a, STRONG: s}} for q, a, s in WRONG]
PRICES = {
    "weak": Price(Decimal("0.6") / 10**6, Decimal("0.6") / 10**6),
    "strong": Price(Decimal(10) / 10**6, Decimal(30) / 10**6),
}
SAMPLES = 180  # the refit's held-back share (30%) is then above the 50 a comparison needs
LEARNING = 200  # requests escalated while each cascade collects samples (min_samples)


def scorer_file(path: Path, inverted: bool) -> str:
    """A learned scorer (no calibration) fitted on the recorded answers, or on their opposite."""
    items = [(Scored(q, a), True) for q, a in RIGHT] + [(Scored(q, a), False) for q, a, _ in WRONG]
    x = np.array([features(item) for item, _ in items] * 4, dtype=float)
    y = np.array([ok != inverted for _, ok in items] * 4)
    train_matrix(Matrix(x, y, y, None), folds=1).model.save(path)
    return str(path)


def cascade(name: str, scorer: str) -> dict:
    return {
        "name": name,
        "tiers": ["weak", "strong"],
        "scorer": f"learned:{scorer}",
        "quality_target": 0.9,
        "min_samples": LEARNING,
        "last_tier_quality": 1.0,
        "shadow_rate": 0.0,  # no shadow calls: the tallies below add up the answers' own calls
        "refit_every": SAMPLES,
        # no router: its exploration draws (unseeded) would make the samples, and the estimates
        # checked below, differ from run to run (test_precall_gateway.py and tests/policies/test_precall.py test it)
        "router": False,
    }


@pytest.fixture(scope="module")
def fake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeUpstream]:
    f = recorded_upstream(tmp_path_factory.mktemp("learn-fake"), RECORDS)
    yield f
    f.stop()


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory, fake: FakeUpstream) -> Iterator[GatewayProcess]:
    workdir = tmp_path_factory.mktemp("gw-learning")
    config = {
        "models": [
            model("weak", WEAK, fake.url, "0.6", "0.6", max_retries=0),
            model("strong", STRONG, fake.url, "10", "30", max_retries=0),
        ],
        "cascades": [
            cascade("relearn", scorer_file(workdir / "backwards.json", inverted=True)),
            cascade("steady", scorer_file(workdir / "right.json", inverted=False)),
            # learning throughout (every request escalated, each a sample); verdicts read every 10
            {"name": "plain", "tiers": ["weak", "strong"], "scorer": "rules", "min_samples": 1000, "refit_every": 10},
        ],
        "cache": {"exact": {"enabled": False}},
    }
    g = GatewayProcess(config, workdir)
    yield g
    g.stop()


def view(gw: GatewayProcess, name: str) -> dict:
    return next(c for c in gw.admin("GET", "/admin/cascades").json()["data"] if c["name"] == name)


class Sent:
    """What the answers' headers and usage say the cascade did."""

    def __init__(self) -> None:
        self.charged = self.always_last = Decimal(0)
        self.escalated = self.answered = 0

    def ask(self, client: httpx.Client, name: str, question: str) -> str:
        r = client.post(
            "/v1/chat/completions", json={"model": name, "messages": [{"role": "user", "content": question}]}
        )
        assert r.status_code == 200, r.text
        served, body = r.headers["x-costgate-model"], r.json()
        usage = Usage(body["usage"]["prompt_tokens"], body["usage"]["completion_tokens"])
        self.answered += 1
        self.escalated += served == "strong"
        self.charged += Decimal(r.headers["x-costgate-cost-usd"])
        self.always_last += cost_of(usage, PRICES["strong"])  # the last tier's own call, or its price on these tokens
        return served


def test_a_refit_replaces_a_worse_scorer_and_keeps_a_good_one(gw: GatewayProcess, fake: FakeUpstream) -> None:
    client = httpx.Client(base_url=gw.url, headers={"authorization": f"Bearer {gw.new_key('team-learn')}"}, timeout=30)
    sent = {"relearn": Sent(), "steady": Sent()}
    for name in sent:
        before = view(gw, name)
        assert before["mode"] == "learning" and before["refit"]["tried"] == 0
        assert before["refit"]["scorer_in_use"] == "as configured"
        for i in range(SAMPLES):
            assert sent[name].ask(client, name, QUESTIONS[i % len(QUESTIONS)]) == "strong"  # learning: escalated

    def refitted(name: str) -> dict | None:
        v = view(gw, name)
        return v if v["refit"]["tried"] == 1 and not v["refit"]["running"] else None

    relearn = wait_until(lambda: refitted("relearn"), timeout=30, interval=0.05, what="relearn's refit")
    steady = wait_until(lambda: refitted("steady"), timeout=30, interval=0.05, what="steady's refit")

    last = relearn["refit"]["last"]
    assert relearn["refit"]["replaced"] == 1 and last["replaced"] and last["held_back"] >= 50
    assert last["candidate_auc"] == 1.0 and last["current_auc"] == 0.0  # the scorer ranked backwards
    assert relearn["refit"]["scorer_in_use"] == "refitted"
    assert relearn["scorer_auc"] == 1.0 and relearn["scorer_auc_on"] == "held-back samples of the last refit"
    last = steady["refit"]["last"]
    assert steady["refit"]["replaced"] == 0 and not last["replaced"] and "does not beat" in last["reason"]
    assert last["current_auc"] == last["candidate_auc"] == 1.0
    assert steady["refit"]["scorer_in_use"] == "as configured" and steady["scorer_auc"] == 1.0
    assert relearn["samples"] == steady["samples"] == SAMPLES  # the rebuilt controller has every sample
    metrics = httpx.get(gw.url + "/metrics").text
    assert 'costgate_cascade_refits_total{cascade="relearn",outcome="replaced"} 1.0' in metrics
    assert 'costgate_cascade_refits_total{cascade="steady",outcome="kept"} 1.0' in metrics
    assert 'costgate_cascade_quality_lower_bound{cascade="relearn"}' in metrics

    # The refitted scorer comes with a calibration from its cross-validation: it certifies a
    # threshold at once. The other cascade's scorer has none: it learns until min_samples. Then
    # both accept the right answers only.
    assert relearn["mode"] == "certified" and relearn["calibration"] == "in use"
    assert steady["mode"] == "learning" and steady["calibration"] == "none"
    for name in sent:
        for i in range(SAMPLES, LEARNING + 12):
            question = QUESTIONS[i % len(QUESTIONS)]
            served = sent[name].ask(client, name, question)
            if i >= LEARNING or name == "relearn":
                assert served == ("weak" if question in dict(RIGHT) else "strong"), (name, question)

    def settled(name: str) -> dict | None:
        """The view once the last requests settled and their samples reached the controller (each
        on a task of its own, after the answer went out: read at once, the estimate could miss them)."""
        v = view(gw, name)
        return v if v["answered"] == LEARNING + 12 and v["samples"] == v["escalated"] else None

    for name, s in sent.items():
        v = wait_until(lambda n=name: settled(n), timeout=30, interval=0.05, what=f"{name}'s last samples")
        assert v["mode"] == "certified" and v["threshold"] is not None and v["meets_target"]
        # relearn's estimate comes from its refitted scorer's calibration, whose held-back share
        # and folds follow the samples' stored order: the order they were recorded in (it varied
        # with the inserts' commit order, 0.463-0.495 over nine runs, until sampling.py kept it)
        assert v["quality"] >= v["quality_lower_bound"] >= 0.9 and v["estimated_escalation"] == pytest.approx(
            0.5, abs=0.03
        )
        escalated = SAMPLES + (LEARNING + 12 - SAMPLES) // 2 if name == "relearn" else LEARNING + 6
        assert (v["answered"], v["escalated"]) == (s.answered, s.escalated) == (LEARNING + 12, escalated)
        assert v["escalation_rate"] == s.escalated / s.answered
        assert Decimal(v["charged_usd"]) == s.charged and Decimal(v["shadow_usd"]) == 0
        assert Decimal(v["always_last_tier_usd"]) == s.always_last
        assert Decimal(v["saved_usd"]) == s.always_last - s.charged

    # The refitted scorer outlives a restart; the configured one stays where nothing was replaced.
    threshold = view(gw, "relearn")["threshold"]
    gw.stop()
    gw.start()
    relearn, steady = view(gw, "relearn"), view(gw, "steady")
    assert relearn["refit"]["scorer_in_use"] == "refitted" and relearn["threshold"] == threshold
    assert steady["refit"]["scorer_in_use"] == "as configured"
    assert relearn["samples"] == SAMPLES + 16  # stored: every escalated request and no accepted one


def test_a_rules_scorer_is_not_refitted_but_may_be_upgraded(gw: GatewayProcess) -> None:
    # tests/gateway/routing/test_refit_upgrade_gateway.py: once it has enough samples
    plain = view(gw, "plain")
    assert plain["refit"]["upgrades"] and plain["refit"]["scorer_in_use"] == "as configured"
    assert plain["scorer"] == plain["scorer_configured"] == "rules"
    assert not view(gw, "steady")["refit"]["upgrades"]  # a learned scorer is refitted instead


def test_teams_verdicts_on_the_last_tier_set_its_quality(gw: GatewayProcess) -> None:
    key = gw.new_key("team-verdicts")
    client = httpx.Client(base_url=gw.url, headers={"authorization": f"Bearer {key}"}, timeout=30)
    ids = []
    for i in range(30):
        body = {"model": "plain", "messages": [{"role": "user", "content": QUESTIONS[i % len(QUESTIONS)]}]}
        r = client.post("/v1/chat/completions", json=body)
        assert r.headers["x-costgate-model"] == "strong"
        ids.append(r.headers["x-costgate-request-id"])
    before = view(gw, "plain")
    assert before["last_tier_quality_source"] == "default" and before["last_tier_quality"] == 0.5
    for n, request_id in enumerate(ids):  # 24 judged right, 6 wrong
        verdict = "wrong" if n % 5 == 0 else "right"
        assert client.post("/v1/feedback", json={"request_id": request_id, "verdict": verdict}).status_code == 200
    for i in range(10):  # ten more samples: the verdicts are read again
        body = {"model": "plain", "messages": [{"role": "user", "content": QUESTIONS[i % len(QUESTIONS)]}]}
        client.post("/v1/chat/completions", json=body)

    def from_feedback() -> dict | None:
        v = view(gw, "plain")
        return v if v["last_tier_quality_source"] == "feedback" else None

    after = wait_until(from_feedback, timeout=30, interval=0.05, what="A from the verdicts")
    assert after["last_tier_quality"] == 24 / 30
