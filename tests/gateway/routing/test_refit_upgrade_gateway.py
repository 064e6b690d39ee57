"""A cascade on the default `rules` scorer learns a learned scorer from its own traffic, through
a running gateway: fed answers where the cheap tier agrees with the last one on questions of one
shape and never on another, it switches to a learned scorer trained on its samples, then accepts
the cheap answer for the agreeing shape and escalates the other; one whose agreeing and
disagreeing answers look alike keeps `rules` (and keeps escalating). And a learned scorer whose
calibration has correctness labels gives way to a candidate that certifies the target, bound
without labels, for fewer escalations."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

from policies.scorers import Scored
from policies.scorers.answer_features import features
from policies.scorers.training import Matrix, train_matrix
from tests.support import GatewayProcess, model, recorded_upstream, wait_until

pytestmark = pytest.mark.slow  # boots processes: not in the fast lane

WEAK, STRONG = "upgrade-weak", "upgrade-strong"
# Worked answers the last tier agrees with; hedged guesses it never agrees with.
WORKED = [(f"A crate holds {a} rows of {b} jars. How many jars?", a * b) for a, b in [(3, 4), (6, 7), (12, 5)]]
WORKED += [(f"A crate holds {a} rows of {b} jars. How many jars?", a * b) for a, b in [(8, 9), (11, 3), (4, 15)]]
GUESSED = [(f"A shelf has {a} boxes of {b} pins. How many pins?", a * b) for a, b in [(7, 8), (9, 6), (13, 4)]]
GUESSED += [(f"A shelf has {a} boxes of {b} pins. How many pins?", a * b) for a, b in [(5, 14), (16, 3), (2, 21)]]
# Two questions and cheap answers that look exactly alike (the same features; the questions,
# one with a trailing space, the same MiniLM vector, so the same topic), one agreeing and one not.
ALIKE = [("What is 2 + 5?", "2 + 5 = 7\n#### 7", "#### 7"), ("What is 2 + 5? ", "2 + 5 = 7\n#### 7", "#### 8")]

RECORDS = [
    {"prompt": q, "answers": {WEAK: f"{q.split()[3]} * {q.split()[6]} = {r}\n#### {r}", STRONG: f"#### {r}"}}
    for q, r in WORKED
]
RECORDS += [{"prompt": q, "answers": {WEAK: f"Maybe about {r + 3}?", STRONG: f"#### {r}"}} for q, r in GUESSED]
RECORDS += [{"prompt": q, "answers": {WEAK: weak, STRONG: strong}} for q, weak, strong in ALIKE]
SHAPED = [q for pair in zip(WORKED, GUESSED) for q, _ in pair]  # alternating
# For a labelled scorer that knows only one kind of the answers the last tier agrees with: KNOWN
# (worked, agreeing), PLAIN (a bare answer, agreeing), SLIPPED (worked, with an arithmetic slip:
# the last tier disagrees). Question, cheap answer, the last tier's number.
KNOWN = [
    (f"A tray has {a} cups of {b} beads. How many beads?", f"{a} * {b} = {a * b}\n#### {a * b}", a * b)
    for a, b in [(3, 4), (6, 7), (11, 3)]
]
PLAIN = [
    (f"A van has {a} bags of {b} nuts. How many nuts?", f"The answer is {a * b}.", a * b)
    for a, b in [(12, 5), (8, 9), (4, 15)]
]
SLIPPED = [
    (f"A bin has {a} packs of {b} tags. How many tags?", f"{a} * {b} = {a * b + 3}\n#### {a * b + 3}", a * b)
    for a, b in [(7, 8), (9, 6), (13, 4), (5, 14), (16, 3), (2, 21)]
]
RECORDS += [{"prompt": q, "answers": {WEAK: weak, STRONG: f"#### {r}"}} for q, weak, r in KNOWN + PLAIN + SLIPPED]
# Half KNOWN (accepted), half PLAIN or SLIPPED (escalated). The share accepted must stay well
# above the controller's `min_accept` (20%): at a quarter, the weighted estimate from shadow
# samples dipped under it now and then, the controller skipped the cheap tier for a while, and
# the escalations that make the samples came too slowly for the refit (2 runs in 10).
MIXED = [t[0] for k, p in zip(KNOWN * 3, PLAIN + SLIPPED) for t in (k, p)]  # KNOWN, PLAIN, ..., KNOWN, SLIPPED
SAMPLES = 180  # refit_every: the held-back 30% is then above the 50 rows a comparison needs


def cascade(name: str) -> dict:
    # The default cascade (scorer rules, quality_target 0.95, A unknown): it learns (every request
    # escalated, each a sample) while an early fit may certify, fitting from 20 samples on.
    return {"name": name, "tiers": ["weak", "strong"], "refit_every": SAMPLES}


def labelled_scorer(path: Path) -> str:
    """A learned scorer whose calibration has correctness labels (the last tier right on every
    example), trained to accept KNOWN answers only: PLAIN ones were labelled wrong."""
    items = [(Scored(q, a), True) for q, a, _ in KNOWN] + [(Scored(q, a), False) for q, a, _ in PLAIN + SLIPPED]
    x = np.array([features(item) for item, _ in items] * 20, dtype=float)
    y = np.array([ok for _, ok in items] * 20)
    trained = train_matrix(Matrix(x, y, y, np.ones(len(y), dtype=bool)), folds=10).model
    assert trained.calibration is not None and trained.calibration.last_right is not None
    trained.save(path)
    return str(path)


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    fake = recorded_upstream(tmp_path_factory.mktemp("upgrade-fake"), RECORDS)
    workdir = tmp_path_factory.mktemp("gw-upgrade")
    config = {
        "models": [
            model("weak", WEAK, fake.url, "0.6", "0.6", max_retries=0),
            model("strong", STRONG, fake.url, "10", "30", max_retries=0),
        ],
        "cascades": [
            cascade("shaped"),
            cascade("alike"),
            {**cascade("fixed"), "adaptive": False, "thresholds": [1.0]},  # the opt-out
            {**cascade("labelled"), "min_samples": 30, "scorer": "learned:" + labelled_scorer(workdir / "l.json")},
        ],
        "cache": {"exact": {"enabled": False}},
    }
    g = GatewayProcess(config, workdir)
    yield g
    g.stop()
    fake.stop()


def view(gw: GatewayProcess, name: str) -> dict:
    return next(c for c in gw.admin("GET", "/admin/cascades").json()["data"] if c["name"] == name)


def ask(client: httpx.Client, name: str, question: str) -> str:
    r = client.post("/v1/chat/completions", json={"model": name, "messages": [{"role": "user", "content": question}]})
    assert r.status_code == 200, r.text
    return r.headers["x-costgate-model"]


def tried(gw: GatewayProcess, name: str) -> dict | None:
    v = view(gw, name)
    return v if v["refit"]["tried"] >= 1 and not v["refit"]["running"] else None


def test_a_rules_cascade_upgrades_to_a_learned_scorer_from_its_traffic(gw: GatewayProcess) -> None:
    client = httpx.Client(base_url=gw.url, headers={"authorization": f"Bearer {gw.new_key('team-up')}"}, timeout=30)
    before = view(gw, "shaped")
    assert before["scorer"] == before["scorer_configured"] == "rules" and before["mode"] == "learning"
    assert before["refit"]["enabled"] and before["refit"]["upgrades"] and before["refit"]["tried"] == 0
    first_cheap = None
    for i in range(SAMPLES):
        served = ask(client, "shaped", SHAPED[i % len(SHAPED)])
        if served == "weak":
            first_cheap = i
            break
        # a fit runs on a worker thread while requests go on: wait for it, so the request at
        # which the cascade first answers cheaply does not depend on the machine's load
        wait_until(lambda: not view(gw, "shaped")["refit"]["running"], timeout=60, interval=0.05)
    # learned from tens of samples by an early fit (policies/scorers/first_fit.py), before
    # refit_every (180), where the old code first answered cheaply: at A unknown (0.5) about a
    # hundred samples prove the target here
    assert first_cheap is not None and first_cheap < 180, first_cheap
    after = wait_until(lambda: tried(gw, "shaped"), timeout=60, interval=0.05, what="shaped's upgrade")
    assert after["refit"]["replaced"] == 1 and after["refit"]["tried"] >= 1
    assert after["scorer"] == "learned (refit from traffic)" and after["scorer_configured"] == "rules"
    assert after["refit"]["scorer_in_use"] == "learned (refit from traffic)"
    assert after["mode"] == "certified" and after["calibration"] == "in use" and after["meets_target"]
    assert after["threshold"] is not None and after["quality_lower_bound"] >= 0.95
    curve = after["learning_curve"]
    assert curve and curve[0]["requests"] == 5 and curve[0]["mode"] == "learning"
    assert curve[0]["cost_ratio"] > 1  # learning: both tiers paid

    for question, _ in WORKED:  # the agreeing shape: the cheap answer
        assert ask(client, "shaped", question) == "weak", question
    for question, _ in GUESSED:  # the other: escalated
        assert ask(client, "shaped", question) == "strong", question
    metrics = httpx.get(gw.url + "/metrics").text
    assert 'costgate_cascade_refits_total{cascade="shaped",outcome="replaced"} 1.0' in metrics

    # The upgrade outlives a restart: loaded from the data directory, with its threshold.
    threshold = view(gw, "shaped")["threshold"]
    gw.stop()
    gw.start()
    again = view(gw, "shaped")
    assert again["scorer"] == "learned (refit from traffic)" and again["threshold"] == threshold
    client = httpx.Client(base_url=gw.url, headers=client.headers, timeout=30)
    assert ask(client, "shaped", WORKED[0][0]) == "weak" and ask(client, "shaped", GUESSED[0][0]) == "strong"


def test_answers_that_look_alike_keep_the_rules_scorer(gw: GatewayProcess) -> None:
    client = httpx.Client(base_url=gw.url, headers={"authorization": f"Bearer {gw.new_key('team-up')}"}, timeout=30)
    for i in range(SAMPLES):
        assert ask(client, "alike", ALIKE[i % 2][0]) == "strong"
    after = wait_until(lambda: tried(gw, "alike"), timeout=60, interval=0.05, what="alike's try")
    last = after["refit"]["last"]
    assert not last["replaced"] and "does not beat" in last["reason"], last
    # out of fold, answers that look alike rank no better than chance (below it, on balanced folds)
    assert last["current_auc"] == 0.5 and last["candidate_auc"] < 0.6
    assert after["scorer"] == "rules" and after["refit"]["scorer_in_use"] == "as configured"
    assert after["refit"]["replaced"] == 0 and after["threshold"] is None  # still escalating everything
    assert ask(client, "alike", ALIKE[0][0]) == "strong"


def test_adaptive_false_opts_out(gw: GatewayProcess) -> None:
    refit = view(gw, "fixed")["refit"]
    assert refit == {
        "enabled": False,
        "why": "adaptive: false keeps the configured thresholds, set for the scorer as it is",
    }


def test_a_labelled_calibration_gives_way_to_a_candidate_that_certifies_for_less(gw: GatewayProcess) -> None:
    # policies/scorers/refit.py `Incumbent`: the labelled scorer certifies at once and holds
    # (the KNOWN answers it accepts agree), but it escalates the PLAIN ones too. A candidate
    # trained on agreement accepts both, certified without labels, and replaces it.
    client = httpx.Client(base_url=gw.url, headers={"authorization": f"Bearer {gw.new_key('team-up')}"}, timeout=30)
    before = view(gw, "labelled")
    assert before["mode"] == "certified" and before["calibration"] == "in use"
    assert before["estimated_escalation"] == pytest.approx(0.75, abs=0.02)
    known = {q for q, _, _ in KNOWN}
    for question, _, _ in KNOWN + PLAIN + SLIPPED:
        assert ask(client, "labelled", question) == ("weak" if question in known else "strong"), question
    for i in range(SAMPLES * 2):  # one in two escalated: SAMPLES samples, and a few shadow ones
        ask(client, "labelled", MIXED[i % len(MIXED)])

    after = wait_until(lambda: tried(gw, "labelled"), timeout=60, interval=0.05, what="labelled's refit")
    last = after["refit"]["last"]
    assert last["replaced"], last
    assert "bound without labels it escalates" in last["reason"] and "with the labelled calibration" in last["reason"]
    assert after["scorer"].endswith("(refitted)") and after["mode"] == "certified" and after["meets_target"]
    assert after["estimated_escalation"] < before["estimated_escalation"] - 0.1
    for question, _, _ in KNOWN + PLAIN:
        assert ask(client, "labelled", question) == "weak", question
    for question, _, _ in SLIPPED:
        assert ask(client, "labelled", question) == "strong", question
