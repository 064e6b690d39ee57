"""A cascade's shadow samples are real spend (issue 13, item 5), through a running gateway: held
against and settled to every budget the request hit, taken only after the request's own hold
is released, and refused cleanly (no call, no sample, nothing held) when a budget cannot hold
them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import ExitStack
from decimal import Decimal

import httpx
import openai
import pytest

from tests.gateway.budget_support import SHARED_REDIS, redis_prefix
from tests.support import FakeUpstream, GatewayProcess, model, recorded_upstream, wait_until

pytestmark = pytest.mark.slow  # boots processes: not in the fast lane

WEAK, STRONG = "rec-weak", "rec-strong"
RECORDS = [{"prompt": "what is 3 + 4?", "answers": {WEAK: "3 + 4 = 7\n#### 7", STRONG: "#### 7"}}]  # others echo


@pytest.fixture(scope="module")
def fake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeUpstream]:
    f = recorded_upstream(tmp_path_factory.mktemp("recorded"), RECORDS)
    yield f
    f.stop()


@pytest.fixture(scope="module", params=["embedded", "redis"])
def gw(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, fake: FakeUpstream
) -> Iterator[GatewayProcess]:
    with ExitStack() as stack:
        store = {}
        if request.param == "redis":  # budget calls that yield to the event loop, as replicas run them
            prefix = stack.enter_context(redis_prefix())
            store = {"redis_url": SHARED_REDIS, "budgets": {"redis_prefix": prefix}}
        g = GatewayProcess({**config(fake.url), **store}, tmp_path_factory.mktemp(f"gw-shadow-{request.param}"))
        yield g
        g.stop()


def config(base: str) -> dict:
    return {
        "models": [
            model("weak", WEAK, base, "0.6", "0.6", max_retries=0),
            model("strong", STRONG, base, "10", "30", max_retries=0),
        ],
        # every answer is accepted (threshold 0) and every accepted answer is shadow-sampled
        "cascades": [
            {
                "name": "shadowed",
                "tiers": ["weak", "strong"],
                "scorer": "rules",
                "adaptive": False,
                "thresholds": [0.0],
                "shadow_rate": 1.0,
            }
        ],
        # On: storing the answer is the first settle that waits on the store (with Redis), which
        # is when a shadow started at delivery would take its hold beside the request's.
        "cache": {"exact": {"enabled": True}},
    }


@pytest.fixture(scope="module")
def key(gw: GatewayProcess) -> dict:
    assert gw.admin("POST", "/admin/teams", json={"name": "shadow-team"}).status_code == 200
    response = gw.admin("POST", "/admin/keys", json={"team": "shadow-team"})
    assert response.status_code == 200
    return response.json()


def put_budget(gw: GatewayProcess, scope: str, subject: str, amount: str) -> str:
    response = gw.admin(
        "PUT", "/admin/budgets", json={"scope": scope, "id": subject, "amount_usd": amount, "period": "total"}
    )
    assert response.status_code == 200, response.text
    return response.json()["id"]


def budgets(gw: GatewayProcess) -> dict[str, dict]:
    return {b["id"]: b for b in gw.admin("GET", "/admin/budgets").json()["data"]}


def samples(gw: GatewayProcess) -> int:
    return gw.admin("GET", "/admin/cascades").json()["data"][0]["samples"]


def shadow_errors(gw: GatewayProcess) -> float:
    found = re.search(
        r'costgate_cascade_shadow_calls_total\{cascade="shadowed",status="error"\} ([0-9.]+)',
        httpx.get(gw.url + "/metrics").text,
    )
    return float(found.group(1)) if found else 0.0


def calls_of(gw: GatewayProcess, request_id: str) -> dict[str, dict]:
    """The request's ledger rows and its shadow's, by request id, once both are written."""

    def both() -> dict[str, dict] | None:
        response = gw.admin("GET", f"/admin/traces/{request_id}")
        calls = {c["request_id"]: c for c in response.json().get("calls", [])}
        return calls if len(calls) == 2 else None

    return wait_until(both, timeout=20, interval=0.05, what=f"{request_id} and its shadow row")


def ask(gw: GatewayProcess, key: dict, question: str, stream: bool = False, **kwargs: object) -> str:
    """One accepted cascade answer (a question never asked before: no cache hit); its request id."""
    client = gw.client(key["key"])
    messages = [{"role": "user", "content": question}]
    if stream:
        with client.chat.completions.with_streaming_response.create(
            model="shadowed", messages=messages, stream=True, max_tokens=50, **kwargs
        ) as response:
            assert "".join(c.choices[0].delta.content or "" for c in response.parse() if c.choices)
            assert response.headers["x-costgate-model"] == "weak"
            return response.headers["x-costgate-request-id"]
    raw = client.chat.completions.with_raw_response.create(model="shadowed", messages=messages, max_tokens=50, **kwargs)
    assert raw.headers["x-costgate-model"] == "weak" and raw.headers["x-costgate-cache"] == "miss"
    return raw.headers["x-costgate-request-id"]


@pytest.mark.parametrize("stream", [False, True])
def test_a_shadow_sample_is_held_and_charged_against_every_budget_the_request_hit(
    gw: GatewayProcess, key: dict, fake: FakeUpstream, stream: bool
) -> None:
    user, tag = f"alice-{stream}", f"project-{stream}"
    ids = {
        scope: put_budget(gw, scope, subject, "5")
        for scope, subject in (("key", key["id"]), ("team", "shadow-team"), ("user", user), ("tag", tag))
    }
    unrelated = put_budget(gw, "tag", f"elsewhere-{stream}", "5")
    before = {i: Decimal(b["spent_usd"]) for i, b in budgets(gw).items()}
    strong_before, samples_before = fake.stats().get(STRONG, 0), samples(gw)

    request_id = ask(
        gw, key, f"every budget, streamed: {stream}", stream, user=user, extra_headers={"x-costgate-tags": tag}
    )
    calls = calls_of(gw, request_id)

    shadow = calls[f"{request_id}-shadow"]
    assert shadow["status"] == 200 and shadow["model"] == "strong" and Decimal(shadow["cost_usd"]) > 0
    assert fake.stats()[STRONG] - strong_before == 1 and samples(gw) == samples_before + 1
    total = sum(Decimal(c["cost_usd"]) for c in calls.values())  # the answer and its shadow
    after = budgets(gw)
    for scope, budget_id in ids.items():
        assert Decimal(after[budget_id]["spent_usd"]) - before[budget_id] == total, scope
    assert Decimal(after[unrelated]["spent_usd"]) == before[unrelated]
    assert all(Decimal(b["reserved_usd"]) == 0 for b in after.values())  # every hold settled, none leaked


def worst_case_of(gw: GatewayProcess, key: dict) -> Decimal:
    """The request's worst case, as the budget stage states it when it refuses."""
    put_budget(gw, "user", "probe", "0")
    with pytest.raises(openai.APIStatusError) as refused:
        ask(gw, key, "tight question 0", user="probe")
    assert refused.value.status_code == 402
    return Decimal(re.search(r"worst case \$([0-9.]+)", refused.value.message).group(1))


def test_a_shadow_waits_for_the_request_to_release_its_hold(gw: GatewayProcess, key: dict) -> None:
    # Room for the request's worst case (both tiers) and not for a shadow beside its hold: the
    # shadow fits only once the request has settled to its true cost (the cheap tier's).
    worst = worst_case_of(gw, key)
    for i in range(1, 4):
        budget_id = put_budget(gw, "user", "tight", "0")
        put_budget(gw, "user", "tight", str(Decimal(budgets(gw)[budget_id]["spent_usd"]) + worst))
        request_id = ask(gw, key, f"tight question {i}", user="tight")
        assert calls_of(gw, request_id)[f"{request_id}-shadow"]["status"] == 200


def test_a_shadow_the_budget_cannot_hold_is_refused_cleanly(gw: GatewayProcess, key: dict, fake: FakeUpstream) -> None:
    # A budget on the `cascade-shadow` tag caps shadow spend alone; this one holds nothing.
    capped = put_budget(gw, "tag", "cascade-shadow", "0.000001")
    try:
        strong_before, samples_before, errors_before = fake.stats().get(STRONG, 0), samples(gw), shadow_errors(gw)
        spent_before = {i: Decimal(b["spent_usd"]) for i, b in budgets(gw).items()}
        request_id = ask(gw, key, "refused shadow", extra_headers={"x-costgate-tags": "refusal-test"})
        calls = calls_of(gw, request_id)
        shadow = calls[f"{request_id}-shadow"]
        assert shadow["status"] == 402 and Decimal(shadow["cost_usd"]) == 0  # refused before any call
        assert fake.stats().get(STRONG, 0) == strong_before and samples(gw) == samples_before
        after = budgets(gw)
        answer_cost = Decimal(calls[request_id]["cost_usd"])
        team = next(i for i, b in after.items() if b["scope"] == "team")
        assert Decimal(after[team]["spent_usd"]) - spent_before[team] == answer_cost  # the answer only
        assert Decimal(after[capped]["spent_usd"]) == spent_before[capped]  # the earlier shadows' spend
        assert all(Decimal(b["reserved_usd"]) == 0 for b in after.values())
        assert shadow_errors(gw) == errors_before + 1
    finally:
        assert gw.admin("DELETE", f"/admin/budgets/{capped}").status_code == 200
