"""Issue 16, item 2: a budget bounds what one request can cost.

Through the running gateway, in front of a fake upstream that bills the way OpenAI does
(tests/fakes/fake_openai.py, `bill-*`: the whole request body as prompt tokens, images by the tile
rule, n x best_of completions of max_tokens tokens for every prompt of a list), each team gets
a $0.05 budget and attacks it the ways the issue found: a legacy completion with a list of 100
prompts, 800 KB of tools, best_of 20, images, an upstream that ignores max_tokens, all of it
at once. The team's spend (the ledger, and the budget's own counter) never passes the budget;
a request whose worst case does not fit is refused before any upstream call; and an ordinary
request is not refused by an absurd over-estimate.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

import httpx
import pytest

from tests.support import FakeUpstream, GatewayProcess, model, wait_until

pytestmark = pytest.mark.slow  # boots processes: not in the fast lane

BUDGET = Decimal("0.05")
IN, OUT = Decimal("2.5") / 10**6, Decimal("10") / 10**6  # gpt-4o's prices, per token
HI = [{"role": "user", "content": "hi"}]
WORST = re.compile(r"worst case \$([0-9.]+)")
UPSTREAM = {"billed": "bill-openai", "endless": "bill-endless"}  # the fake's model names


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream) -> Iterator[GatewayProcess]:
    models = [
        model("billed", "bill-openai", fake_upstream.url, "2.5", "10", max_output_tokens=256),
        model("endless", "bill-endless", fake_upstream.url, "2.5", "10", max_output_tokens=256),
    ]
    gateway = GatewayProcess(
        {"models": models, "cache": {"exact": {"enabled": False}}},  # every attack is a call
        tmp_path_factory.mktemp("gw-bounds"),
    )
    yield gateway
    gateway.stop()


class Team:
    """A team with its own key and budget."""

    def __init__(self, gw: GatewayProcess, name: str, amount: Decimal | None = BUDGET) -> None:
        self.gw, self.key = gw, gw.new_key(name)
        self.id = next(t["id"] for t in gw.admin("GET", "/admin/teams").json()["data"] if t["name"] == name)
        self.budget_id = None
        if amount is not None:
            put = gw.admin(
                "PUT",
                "/admin/budgets",
                json={"scope": "team", "id": name, "amount_usd": str(amount), "period": "total"},
            )
            assert put.status_code == 200, put.text
            self.budget_id, self.amount = put.json()["id"], amount

    def post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        return httpx.post(self.gw.url + path, json=body, headers={"authorization": f"Bearer {self.key}"}, timeout=60)

    def until_refused(self, send: Callable[[], int], most: int = 60) -> list[int]:
        statuses = []
        while len(statuses) < most and (not statuses or statuses[-1] != 402):
            statuses.append(send())
        assert statuses[-1] == 402 and 200 in statuses, statuses
        return statuses

    def spend(self) -> Decimal:
        rows = self.gw.spend("team")["rows"]  # flushes the ledger first
        return sum((Decimal(r["cost_usd"]) for r in rows if r["group"] == self.id), Decimal(0))

    def assert_within_budget(self) -> Decimal:
        spent = self.spend()
        view = next(b for b in self.gw.admin("GET", "/admin/budgets").json()["data"] if b["id"] == self.budget_id)
        assert Decimal(view["spent_usd"]) == spent  # the budget's counter and the ledger agree
        assert Decimal(view["reserved_usd"]) == 0  # every hold was released
        assert spent <= self.amount, f"spent {spent} of {self.amount}"
        return spent


def refused_before_any_call(team: Team, fake: FakeUpstream, path: str, body: dict[str, Any]) -> Decimal:
    """The request is refused with 402 and the upstream never sees it; its worst case, from the message."""
    upstream = UPSTREAM[body["model"]]
    before = fake.stats().get(upstream, 0)
    response = team.post(path, body)
    assert response.status_code == 402, response.text[:300]
    assert response.json()["error"]["code"] == "budget_exceeded"
    assert fake.stats().get(upstream, 0) == before
    return Decimal(WORST.search(response.json()["error"]["message"]).group(1))


def test_a_list_of_100_prompts(gw: GatewayProcess, fake_upstream: FakeUpstream) -> None:
    team = Team(gw, "prompt-list")
    prompts = [" ".join(["word"] * 50)] * 100
    worst = refused_before_any_call(
        team, fake_upstream, "/v1/completions", {"model": "billed", "prompt": prompts, "max_tokens": 100}
    )
    assert worst > 100 * 100 * OUT  # every prompt's completion is in it
    team.until_refused(
        lambda: team.post("/v1/completions", {"model": "billed", "prompt": prompts[:10], "max_tokens": 100}).status_code
    )
    team.assert_within_budget()


def test_800_kb_of_tools(gw: GatewayProcess, fake_upstream: FakeUpstream) -> None:
    team = Team(gw, "tools")
    tool = {
        "type": "function",
        "function": {"name": "f", "description": "lorem ipsum dolor " * 400, "parameters": {"type": "object"}},
    }
    worst = refused_before_any_call(
        team,
        fake_upstream,
        "/v1/chat/completions",
        {"model": "billed", "messages": HI, "tools": [tool] * 110, "max_tokens": 10},
    )
    assert worst > 100_000 * IN  # the tools are prompt tokens (800 KB: about 134k)
    team.until_refused(
        lambda: team.post("/v1/chat/completions", {"model": "billed", "messages": HI, "tools": [tool] * 4}).status_code
    )
    team.assert_within_budget()


def test_best_of_20(gw: GatewayProcess) -> None:
    team = Team(gw, "best-of")
    statuses = team.until_refused(
        lambda: (
            team.post(
                "/v1/completions", {"model": "billed", "prompt": "Say something.", "max_tokens": 200, "best_of": 20}
            ).status_code
        )
    )
    assert statuses == [200, 402]  # 20 x 200 tokens cost $0.04: one fits, the second does not
    assert team.assert_within_budget() >= 20 * 200 * OUT


def test_images(gw: GatewayProcess, fake_upstream: FakeUpstream) -> None:
    team = Team(gw, "images")

    def image(i: int) -> dict:
        return {"type": "image_url", "image_url": {"url": f"https://example.com/{i}.png", "detail": "high"}}

    worst = refused_before_any_call(
        team,
        fake_upstream,
        "/v1/chat/completions",
        {
            "model": "billed",
            "max_tokens": 10,
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "describe"}, *(image(i) for i in range(20))]}
            ],
        },
    )
    assert worst > 20 * 1445 * IN  # each image of unknown size at the most tiles
    team.until_refused(
        lambda: (
            team.post(
                "/v1/chat/completions",
                {
                    "model": "billed",
                    "max_tokens": 10,
                    "messages": [{"role": "user", "content": [image(i) for i in range(3)]}],
                },
            ).status_code
        )
    )
    team.assert_within_budget()


def closed_streams(fake: FakeUpstream) -> int:
    return fake.stats().get("closed:bill-endless", 0)


def wait_for(condition: Callable[[], bool], timeout: float = 20.0) -> None:
    wait_until(condition, timeout=timeout, interval=0.05)


def test_a_stream_past_max_tokens_is_cut_at_its_hold(gw: GatewayProcess, fake_upstream: FakeUpstream) -> None:
    team = Team(gw, "endless-stream")
    closed = closed_streams(fake_upstream)
    chunks = list(
        gw.client(team.key).chat.completions.create(
            model="endless", messages=HI, max_tokens=50, stream=True, stream_options={"include_usage": True}
        )
    )
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["length"]
    usage = chunks[-1].usage
    assert usage is not None and 40 <= usage.completion_tokens <= 50 + 4  # max_tokens and the meter's slack
    wait_for(lambda: closed_streams(fake_upstream) > closed)  # the upstream connection was closed

    def one() -> int:
        with httpx.stream(
            "POST",
            gw.url + "/v1/chat/completions",
            headers={"authorization": f"Bearer {team.key}"},
            json={"model": "endless", "messages": HI, "stream": True},
            timeout=60,
        ) as r:
            text = r.read().decode()
        if r.status_code == 200:
            assert '"finish_reason":"length"' in text and ": costgate: stream cut at the budget hold" in text
            assert text.endswith("data: [DONE]\n\n")
        return r.status_code

    team.until_refused(one)
    team.assert_within_budget()


def test_a_whole_answer_past_max_tokens_is_charged_then_refused(gw: GatewayProcess) -> None:
    """Documented: a whole answer cannot be cut; it is charged its true cost, which can pass the
    hold and, once, the budget; then the budget refuses the next request."""
    team = Team(gw, "endless-whole")
    costs = []
    for _ in range(10):
        r = team.post("/v1/chat/completions", {"model": "endless", "messages": HI, "max_tokens": 100})
        if r.status_code == 402:
            break
        assert r.status_code == 200
        usage = r.json()["usage"]
        assert usage["completion_tokens"] == 2000  # 20 x max_tokens
        assert Decimal(r.headers["x-costgate-cost-usd"]) == usage["prompt_tokens"] * IN + 2000 * OUT
        costs.append(Decimal(r.headers["x-costgate-cost-usd"]))
    assert r.status_code == 402
    assert team.spend() == sum(costs) < BUDGET + max(costs)


def test_everything_at_once(gw: GatewayProcess) -> None:
    team = Team(gw, "all-at-once")
    bodies = [
        ("/v1/completions", {"model": "billed", "prompt": ["tell me a story"] * 10, "max_tokens": 60}),
        ("/v1/completions", {"model": "billed", "prompt": "x", "max_tokens": 100, "best_of": 8}),
        ("/v1/chat/completions", {"model": "billed", "messages": HI, "max_tokens": 100, "n": 4}),
        (
            "/v1/chat/completions",
            {
                "model": "billed",
                "max_tokens": 20,
                "messages": [
                    {
                        "role": "user",
                        "content": [{"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}] * 2,
                    }
                ],
            },
        ),
        ("/v1/chat/completions", {"model": "endless", "messages": HI, "max_tokens": 100, "stream": True}),
        ("/v1/chat/completions", {"model": "billed", "messages": HI, "stream": True, "n": 2}),
    ]

    async def run() -> list[int]:
        async with httpx.AsyncClient(
            base_url=gw.url, headers={"authorization": f"Bearer {team.key}"}, timeout=60
        ) as client:

            async def one(path: str, body: dict[str, Any]) -> int:
                async with client.stream("POST", path, json=body) as response:
                    await response.aread()
                    return response.status_code

            return await asyncio.gather(*(one(*bodies[i % len(bodies)]) for i in range(60)))

    statuses = asyncio.run(run())
    assert set(statuses) == {200, 402}, statuses
    team.assert_within_budget()


def test_an_ordinary_request_is_reserved_near_its_true_cost(gw: GatewayProcess, fake_upstream: FakeUpstream) -> None:
    """The worst case (read from a refusal's message) against what the request is billed when
    it runs, using its max_tokens as an answer that fills them does."""
    body = {
        "model": "billed",
        "max_tokens": 100,
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Summarize the plot of Hamlet in two lines."},
        ],
    }
    worst = refused_before_any_call(Team(gw, "tiny", Decimal("0.000001")), fake_upstream, "/v1/chat/completions", body)
    raw = gw.client(Team(gw, "unbudgeted", None).key).chat.completions.with_raw_response.create(**body)
    true = Decimal(raw.headers["x-costgate-cost-usd"])
    assert raw.parse().usage.completion_tokens == 100
    assert true < worst < true * Decimal("1.3"), (worst, true)


def test_the_sdk_sees_a_cut_stream_end_normally(gw: GatewayProcess) -> None:
    team = Team(gw, "sdk-cut")
    with gw.client(team.key).completions.create(model="endless", prompt="go", max_tokens=30, stream=True) as stream:
        chunks = list(stream)
    assert chunks[-1].choices[0].finish_reason == "length"
    assert sum(len(c.choices[0].text.split()) for c in chunks) <= 30 + 4
