"""What if against a real replay: the estimate `costgate whatif` makes from one recording of a
cascade's traffic (policies/whatif.py) must hold, within its stated interval, for fresh traffic
of the same kind sent through a running gateway, in-process, counting every call the ledger
charged (cheap calls, escalations, shadow samples) and the answers the client got."""

from __future__ import annotations

import json
import random
from decimal import Decimal
from pathlib import Path

import httpx
import pytest

from policies.quality_controller import Policy
from policies.scorers import Scored
from policies.whatif import Recorded, estimate
from tests.gateway.in_process import ADMIN_KEY, http_client, new_key, openai_model, running_app, settings_for

PROMPT, COMPLETION = 20, 10  # every call's usage, as the fake upstream reports it
WEAK = {"input_per_mtok": "1", "output_per_mtok": "1"}
STRONG = {"input_per_mtok": "10", "output_per_mtok": "30"}
WEAK_COST = Decimal(PROMPT + COMPLETION) / 10**6
STRONG_COST = (PROMPT * Decimal(10) + COMPLETION * Decimal(30)) / 10**6


def traffic(seed: int, n: int) -> list[tuple[str, str, str]]:
    """(question, cheap answer, last answer): a third are hedged guesses the last tier does not agree with."""
    rng, out = random.Random(seed), []
    for i in range(n):
        a, b = rng.randint(2, 999), rng.randint(2, 999)
        q = f"Order {seed}-{i}: a box holds {a} rows of {b} pens. How many?"
        guess = rng.random() < 1 / 3
        cheap = f"Maybe about {a * b + 3}?" if guess else f"{a} * {b} = {a * b}.\n#### {a * b}"
        out.append((q, cheap, f"#### {a * b}"))
    return out


def recording(rows: list[tuple[str, str, str]]) -> list[Recorded]:
    return [Recorded(Scored(q, c), c.endswith(last[5:]), WEAK_COST, STRONG_COST) for q, c, last in rows]


def upstream(rows: list[tuple[str, str, str]]) -> httpx.MockTransport:
    answers = {q: (c, last) for q, c, last in rows}

    def reply(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        cheap, last = answers[body["messages"][-1]["content"]]
        text = cheap if body["model"] == "weak" else last
        usage = {"prompt_tokens": PROMPT, "completion_tokens": COMPLETION, "total_tokens": PROMPT + COMPLETION}
        choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        return httpx.Response(
            200,
            json={
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [choice],
                "usage": usage,
            },
        )

    return httpx.MockTransport(reply)


def cascade_of(app):
    return app.state.gateway.routing.cascades["auto"]


@pytest.mark.slow  # takes seconds in process: out of the fast lane
async def test_the_what_if_interval_holds_for_a_gateway_replay(tmp_path: Path) -> None:
    policy = Policy(0.95, last_tier_quality=1.0)
    found = estimate(recording(traffic(1, 200)), policy, draws=8, level=0.95)
    fresh = traffic(2, 200)
    models = [openai_model("weak", price=WEAK), openai_model("strong", price=STRONG)]
    cascade = {"name": "auto", "tiers": ["weak", "strong"], "quality_target": 0.95, "last_tier_quality": 1.0}
    settings = settings_for(tmp_path, models, cascades=[cascade])
    async with running_app(settings, transport=upstream(fresh)) as app:
        key = await new_key(app)
        agreeing = 0
        async with http_client(app) as client:
            for q, _, last in fresh:
                r = await client.post(
                    "/v1/chat/completions",
                    json={"model": "auto", "messages": [{"role": "user", "content": q}]},
                    headers={"authorization": f"Bearer {key}"},
                )
                assert r.status_code == 200, r.text
                agreeing += r.json()["choices"][0]["message"]["content"].endswith(last[5:])
                # at a pace where each request's shadow call and fit are done before the next
                # (as the estimate assumes: a fit takes about a second, traffic comes over hours)
                await cascade_of(app).drain()
                learner = cascade_of(app).learner
                assert learner is not None
                await learner.drain()
            spend = await client.get(
                "/admin/spend", params={"group_by": "model"}, headers={"authorization": f"Bearer {ADMIN_KEY}"}
            )
    charged = Decimal(spend.json()["total_usd"])
    cost_ratio = float(charged / (STRONG_COST * len(fresh)))
    assert found.cost_ratio.low <= cost_ratio <= found.cost_ratio.high, (cost_ratio, found.cost_ratio)
    assert found.agreement.low <= agreeing / len(fresh) <= found.agreement.high, (agreeing, found.agreement)
    assert cost_ratio < 0.9  # the gateway learned and saved, as the estimate said it would
