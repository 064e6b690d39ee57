"""Cascades, shadow sampling, breakers and fallbacks, through a running gateway (official
openai SDK) in front of a fake upstream serving recorded answers. The cost router and prompt
compression, on the same recorded answers: tests/policies/test_router_compression_gateway.py."""

from __future__ import annotations

import json
import math
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import httpx
import openai
import pytest

from gateway.core.tokens import count_text
from tests.support import FakeUpstream, GatewayProcess, _env, model, recorded_upstream, wait_until

pytestmark = pytest.mark.slow  # boots processes: not in the fast lane

WEAK, STRONG = "rec-weak", "rec-strong"
CONFIDENT = [-0.01] * 5
UNSURE = [-3.0] * 5
RECORDS = [
    {
        "prompt": "good question",
        "answers": {WEAK: {"content": "3 + 4 = 7\n#### 7", "logprobs": CONFIDENT}, STRONG: "The answer is 7."},
    },
    {
        "prompt": "refused question",
        "answers": {WEAK: {"content": "I'm sorry, I can't help with that.", "logprobs": CONFIDENT}, STRONG: "#### 12"},
    },
    {"prompt": "unsure question", "answers": {WEAK: {"content": "#### 5", "logprobs": UNSURE}, STRONG: "#### 6"}},
    {
        "prompt": "truncated question",
        "answers": {
            WEAK: {"content": "The answer", "finish_reason": "length", "logprobs": CONFIDENT},
            STRONG: "#### 9",
        },
    },
]


GRADER = "rec-grader"
RECORDS += [  # the judge's grades for two answers
    {"prompt": "Question:\ngood question\n\nAnswer:\n3 + 4 = 7\n#### 7", "answers": {GRADER: "9"}},
    {"prompt": "Question:\nunsure question\n\nAnswer:\n#### 5", "answers": {GRADER: "2"}},
]


def config(base: str) -> dict:
    weak = model("weak", WEAK, base, "0.6", "0.6", quality=1, max_retries=0)
    strong = model("strong", STRONG, base, "10", "30", quality=2, max_retries=0)
    dead = model("dead", "fail-500", base, fallbacks=["weak"], max_retries=0)
    dead_tier = model("dead-tier", "fail-500", base, max_retries=0)
    grader = model("grader", GRADER, base, "0.1", "0.1")
    return {
        "models": [weak, strong, dead, dead_tier, grader],
        "cascades": [
            {
                "name": "auto",
                "tiers": ["weak", "strong"],
                "scorer": "logprob",
                "thresholds": [0.5],
                "adaptive": False,
                "shadow_rate": 0.0,
            },
            {
                "name": "shadowed",
                "tiers": ["weak", "strong"],
                "scorer": "logprob",
                "shadow_rate": 1.0,
                "quality_target": 0.6,
                "min_samples": 5,
                "last_tier_quality": 1.0,
            },
            {"name": "rules-only", "tiers": ["weak", "strong"], "quality_target": 0.95, "min_samples": 10},
            {"name": "broken-first", "tiers": ["dead-tier", "strong"], "scorer": "rules", "shadow_rate": 0.0},
            {
                "name": "judged",
                "tiers": ["weak", "strong"],
                "scorer": "judge:grader",
                "thresholds": [0.5],
                "adaptive": False,
                "shadow_rate": 0.0,
            },
        ],
        "breaker": {"min_requests": 3, "window_s": 60, "open_s": 600},
        # These tests count the calls each request makes: a repeated question must not be a cache hit.
        "cache": {"exact": {"enabled": False}},
    }


@pytest.fixture(scope="module")
def fake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeUpstream]:
    f = recorded_upstream(tmp_path_factory.mktemp("recorded"), RECORDS)
    yield f
    f.stop()


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory, fake: FakeUpstream) -> Iterator[GatewayProcess]:
    g = GatewayProcess(config(fake.url), tmp_path_factory.mktemp("gw-cascade"))
    yield g
    g.stop()


@pytest.fixture(scope="module")
def client(gw: GatewayProcess) -> openai.OpenAI:
    return gw.client(gw.new_key("team-cascade"))


def ask(client: openai.OpenAI, model_name: str, text: str, **kwargs):
    return client.chat.completions.with_raw_response.create(
        model=model_name, messages=[{"role": "user", "content": text}], **kwargs
    )


def cost_of(usage_in: int, usage_out: int, price_in: str, price_out: str) -> Decimal:
    return (usage_in * Decimal(price_in) + usage_out * Decimal(price_out)) / 10**6


def test_confident_cheap_answer_is_returned(client: openai.OpenAI, fake: FakeUpstream) -> None:
    before = fake.stats().get(STRONG, 0)
    raw = ask(client, "auto", "good question")
    completion = raw.parse()
    assert completion.choices[0].message.content == "3 + 4 = 7\n#### 7"
    assert raw.headers["x-costgate-model"] == "weak"
    assert completion.choices[0].logprobs is None  # asked for the scorer, not shown to the client
    assert Decimal(raw.headers["x-costgate-cost-usd"]) == cost_of(
        completion.usage.prompt_tokens, completion.usage.completion_tokens, "0.6", "0.6"
    )
    assert fake.stats().get(STRONG, 0) == before


@pytest.mark.parametrize(
    "question, expected",
    [
        ("unsure question", "#### 6"),  # low logprob confidence
        ("refused question", "#### 12"),  # a refusal fails the rule checks whatever the logprobs say
        ("truncated question", "#### 9"),  # finish_reason=length
    ],
)
def test_escalates_and_charges_every_call(client: openai.OpenAI, question: str, expected: str) -> None:
    raw = ask(client, "auto", question)
    completion = raw.parse()
    assert completion.choices[0].message.content == expected
    assert raw.headers["x-costgate-model"] == "strong"
    strong_cost = cost_of(completion.usage.prompt_tokens, completion.usage.completion_tokens, "10", "30")
    weak_answer = next(r["answers"][WEAK]["content"] for r in RECORDS if r["prompt"] == question)
    weak_cost = cost_of(completion.usage.prompt_tokens, count_text(weak_answer), "0.6", "0.6")
    assert Decimal(raw.headers["x-costgate-cost-usd"]) == strong_cost + weak_cost  # both calls, summed


def test_the_ledger_splits_an_escalated_cost_by_the_tier_each_call_went_to(
    client: openai.OpenAI, gw: GatewayProcess
) -> None:
    raw = ask(client, "auto", "unsure question")
    usage = raw.parse().usage
    weak_answer = next(r["answers"][WEAK]["content"] for r in RECORDS if r["prompt"] == "unsure question")
    weak = cost_of(usage.prompt_tokens, count_text(weak_answer), "0.6", "0.6")
    strong = cost_of(usage.prompt_tokens, usage.completion_tokens, "10", "30")
    gw.spend()  # flushes the ledger writer
    with sqlite3.connect(gw.workdir / "costgate.db") as db:
        (row,) = db.execute(
            "SELECT served_model, cost_pusd, cost_split FROM ledger WHERE request_id = ?",
            (raw.headers["x-costgate-request-id"],),
        ).fetchall()
    # reconciliation counts each call under its own model (and provider), not all under "strong"
    assert row[0] == "strong" and json.loads(row[2]) == {"weak": int(weak * 10**12), "strong": int(strong * 10**12)}
    assert row[1] == int((weak + strong) * 10**12)


def test_ledger_row_carries_the_summed_cost(client: openai.OpenAI, gw: GatewayProcess) -> None:
    raw = ask(client, "auto", "unsure question", extra_headers={"x-costgate-tags": "sum-check"})
    rows = {r["group"]: r for r in gw.spend("tag")["rows"]}
    assert Decimal(rows["sum-check"]["cost_usd"]) == Decimal(raw.headers["x-costgate-cost-usd"])


def test_streamed_accepted_answer_is_replayed(client: openai.OpenAI) -> None:
    with client.chat.completions.with_streaming_response.create(
        model="auto",
        stream=True,
        stream_options={"include_usage": True},
        messages=[{"role": "user", "content": "good question"}],
    ) as response:
        assert response.headers["x-costgate-model"] == "weak"
        chunks = list(response.parse())
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "3 + 4 = 7\n#### 7"
    usage = chunks[-1].usage
    assert Decimal(usage.model_extra["cost_usd"]) == cost_of(usage.prompt_tokens, usage.completion_tokens, "0.6", "0.6")


def test_streamed_escalation_streams_the_last_tier(client: openai.OpenAI) -> None:
    with client.chat.completions.with_streaming_response.create(
        model="auto",
        stream=True,
        stream_options={"include_usage": True},
        messages=[{"role": "user", "content": "unsure question"}],
    ) as response:
        assert response.headers["x-costgate-model"] == "strong"
        chunks = list(response.parse())
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.strip() == "#### 6"
    assert Decimal(chunks[-1].usage.model_extra["cost_usd"]) > 0


def cascade_view(gw: GatewayProcess, name: str) -> dict:
    return next(c for c in gw.admin("GET", "/admin/cascades").json()["data"] if c["name"] == name)


def wait_samples(gw: GatewayProcess, name: str, n: int) -> dict:
    def enough() -> dict | None:
        view = cascade_view(gw, name)
        return view if view["samples"] >= n else None

    return wait_until(enough, timeout=20, interval=0.05, what=f"{name}: {n} shadow samples")


def test_a_new_cascade_escalates_until_its_samples_prove_a_threshold(
    client: openai.OpenAI, gw: GatewayProcess, fake: FakeUpstream
) -> None:
    view = cascade_view(gw, "shadowed")
    assert view["escalate_all"] and view["samples"] == 0  # no calibration: nothing proven yet
    before = fake.stats()
    for _ in range(5):  # escalated: both answers are at hand, so each is a sample at no extra call
        raw = ask(client, "shadowed", "good question", extra_headers={"x-costgate-tags": "learning-test"})
        assert raw.headers["x-costgate-model"] == "strong"
    after = fake.stats()
    assert (after[WEAK] - before.get(WEAK, 0), after[STRONG] - before.get(STRONG, 0)) == (5, 5)
    view = wait_samples(gw, "shadowed", 5)
    assert view["threshold"] == 0.0 and not view["escalate_all"]  # every cheap answer agreed
    assert view["meets_target"] is True and view["agreement"] == 1.0
    rows = {r["group"]: r for r in gw.spend("tag")["rows"]}
    assert rows["learning-test"]["requests"] == 5 and "cascade-shadow" not in rows


def test_accepted_answers_are_shadow_sampled_and_move_the_threshold(
    client: openai.OpenAI, gw: GatewayProcess, fake: FakeUpstream
) -> None:
    # Runs after the test above certified threshold 0.0; the configured floor shadow_rate is 1.0.
    strong_before = fake.stats().get(STRONG, 0)
    for _ in range(5):
        raw = ask(client, "shadowed", "good question", extra_headers={"x-costgate-tags": "shadow-test"})
        assert raw.headers["x-costgate-model"] == "weak"
    view = wait_samples(gw, "shadowed", 10)
    assert fake.stats()[STRONG] - strong_before == 5  # the shadow calls were real calls
    rows = {r["group"]: r for r in gw.spend("tag")["rows"]}
    assert rows["cascade-shadow"]["requests"] == 5 and Decimal(rows["cascade-shadow"]["cost_usd"]) > 0
    assert rows["shadow-test"]["requests"] == 10  # the answers and their shadow rows, same tags
    trace = gw.admin("GET", f"/admin/traces/{raw.headers['x-costgate-request-id']}").json()
    assert trace["requests"] == 2  # the answer and its shadow call, one transaction
    assert Decimal(trace["cost_usd"]) > Decimal(raw.headers["x-costgate-cost-usd"])
    for _ in range(5):  # unsure answers that disagree: accepted at 0.0 for now, so shadowed
        ask(client, "shadowed", "unsure question")
    view = wait_samples(gw, "shadowed", 15)
    assert view["threshold"] is not None and view["threshold"] > math.exp(-3)  # escalates the unsure ones now
    assert ask(client, "shadowed", "unsure question").headers["x-costgate-model"] == "strong"
    metrics = httpx.get(gw.url + "/metrics").text
    assert 'costgate_cascade_agreement{cascade="shadowed"}' in metrics
    assert 'costgate_cascade_threshold{cascade="shadowed"}' in metrics


def test_a_rules_cascade_gives_up_on_the_cheap_tier(
    client: openai.OpenAI, gw: GatewayProcess, fake: FakeUpstream
) -> None:
    for _ in range(10):  # the rules accept these cheap answers, and each disagrees with the last tier
        assert ask(client, "rules-only", "unsure question").headers["x-costgate-model"] == "strong"
    wait_samples(gw, "rules-only", 10)
    before = fake.stats().get(WEAK, 0)
    for _ in range(20):
        assert ask(client, "rules-only", "unsure question").headers["x-costgate-model"] == "strong"
    assert fake.stats().get(WEAK, 0) - before < 10  # skipped (bar a few probes), not paid for and thrown away
    view = cascade_view(gw, "rules-only")
    assert view["escalate_all"] and view["meets_target"] is True


def test_failing_tier_falls_through_and_breaker_opens(
    client: openai.OpenAI, gw: GatewayProcess, fake: FakeUpstream
) -> None:
    start = fake.stats().get("fail-500", 0)
    for _ in range(4):
        raw = ask(client, "dead", "good question")
        assert raw.headers["x-costgate-model"] == "weak"  # the fallback answers
    assert fake.stats()["fail-500"] - start == 3  # open after 3 failures: the 4th never reached it
    states = {b["deployment"]: b for b in gw.admin("GET", "/admin/breakers").json()["data"]}
    # open for this test's one team (its own breaker), not for every team: one team's failures
    # never cut the others off (policies/breaker.py)
    assert (states["dead"]["state"], states["dead"]["teams_open"]) == ("closed", 1)
    assert states["weak"]["teams_open"] == 0
    assert 'costgate_breaker_teams_open{deployment="dead"} 1.0' in httpx.get(gw.url + "/metrics").text


def test_cascade_skips_a_failing_tier(client: openai.OpenAI) -> None:
    raw = ask(client, "broken-first", "good question")
    assert raw.headers["x-costgate-model"] == "strong"
    assert raw.parse().choices[0].message.content == "The answer is 7."


@pytest.mark.parametrize(
    "question, served, calls",
    [
        ("good question", "weak", {WEAK: 1, GRADER: 1, STRONG: 0}),  # graded 9/10: accepted
        ("unsure question", "strong", {WEAK: 1, GRADER: 1, STRONG: 1}),  # graded 2/10: escalated
    ],
)
def test_judge_scorer_grades_with_a_charged_call(
    client: openai.OpenAI, fake: FakeUpstream, gw: GatewayProcess, question: str, served: str, calls: dict[str, int]
) -> None:
    before = fake.stats()
    raw = ask(client, "judged", question, extra_headers={"x-costgate-tags": f"judged-{served}"})
    assert raw.headers["x-costgate-model"] == served
    after = fake.stats()
    assert {m: after.get(m, 0) - before.get(m, 0) for m in calls} == calls
    rows = {r["group"]: r for r in gw.spend("tag")["rows"]}
    assert Decimal(rows[f"judged-{served}"]["cost_usd"]) == Decimal(raw.headers["x-costgate-cost-usd"])
    assert rows[f"judged-{served}"]["prompt_tokens"] > raw.parse().usage.prompt_tokens  # several calls summed


def test_admin_cascades_needs_the_admin_key(gw: GatewayProcess) -> None:
    assert httpx.get(gw.url + "/admin/cascades").status_code == 401


def test_train_from_the_stored_shadow_samples(gw: GatewayProcess, tmp_path: Path) -> None:
    # Runs after test_shadow_sampling_moves_the_threshold stored agreeing and disagreeing samples.
    out = tmp_path / "from-db.json"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "gateway.cli",
            "cascade",
            "train",
            "--from-db",
            str(gw.config_path),
            "--cascade",
            "shadowed",
            "--folds",
            "1",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=gw.workdir,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "trained on 16 examples (10 acceptable)" in result.stdout  # 10 agreeing, 6 not
    assert out.exists()
