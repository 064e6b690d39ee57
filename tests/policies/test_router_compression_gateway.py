"""The cost router and prompt compression through a running gateway (official openai SDK), in
front of a fake upstream serving recorded answers: the router picks the best model whose worst
case fits the request's cost cap (402 when none does), and a long conversation is summarised by
a real, charged call before the model sees it."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal

import httpx
import openai
import pytest

from policies.compression import SUMMARY_PREFIX, summary_request
from tests.policies.test_cascade_gateway import GRADER, RECORDS, STRONG, WEAK, ask, cost_of
from tests.support import FakeUpstream, GatewayProcess, model, recorded_upstream

pytestmark = pytest.mark.slow  # boots processes: not in the fast lane

HISTORY = [
    m
    for i in range(12)
    for m in (
        {"role": "user", "content": f"Question {i}: tell me about topic {i} in some detail please."},
        {"role": "assistant", "content": f"Topic {i} is interesting. It has many aspects to it."},
    )
]
LONG_CONVERSATION = [{"role": "system", "content": "Be brief."}, *HISTORY, {"role": "user", "content": "good question"}]
SUMMARY = "We covered topics 0 to 11."
# The cascade tests' answers, and the summarizer's summary of the long conversation.
SUMMARIZED = [
    *RECORDS,
    {"prompt": summary_request(LONG_CONVERSATION[1:-2], 256)[1]["content"], "answers": {GRADER: SUMMARY}},
]


@pytest.fixture(scope="module")
def fake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeUpstream]:
    f = recorded_upstream(tmp_path_factory.mktemp("recorded"), SUMMARIZED)
    yield f
    f.stop()


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory, fake: FakeUpstream) -> Iterator[GatewayProcess]:
    base = fake.url
    config = {
        "models": [
            model("weak", WEAK, base, "0.6", "0.6", quality=1, max_retries=0),
            model("strong", STRONG, base, "10", "30", quality=2, max_retries=0),
            model("grader", GRADER, base, "0.1", "0.1"),
        ],
        "cost_router": {"name": "fit", "models": ["weak", "strong"]},
        "compression": {
            "enabled": True,
            "budget_tokens": 64,
            "keep_recent": 2,
            "models": ["weak"],
            "summarizer": "grader",
        },
        "cache": {"exact": {"enabled": False}},  # the compression test counts the summarizer's calls
    }
    g = GatewayProcess(config, tmp_path_factory.mktemp("gw-router"))
    yield g
    g.stop()


@pytest.fixture(scope="module")
def client(gw: GatewayProcess) -> openai.OpenAI:
    return gw.client(gw.new_key("team-router"))


@pytest.mark.parametrize(
    "max_cost, expected",
    [
        (None, "strong"),
        ("0.01", "strong"),
        ("0.001", "weak"),
    ],
)
def test_cost_router_picks_best_model_that_fits(client: openai.OpenAI, max_cost: str | None, expected: str) -> None:
    headers = {"x-costgate-max-cost-usd": max_cost} if max_cost else {}
    raw = ask(client, "fit", "good question", max_tokens=100, extra_headers=headers)
    assert raw.headers["x-costgate-model"] == expected


def test_cost_router_refuses_with_402_when_nothing_fits(client: openai.OpenAI, gw: GatewayProcess) -> None:
    with pytest.raises(openai.APIStatusError) as err:
        ask(client, "fit", "good question", max_tokens=100, extra_headers={"x-costgate-max-cost-usd": "0.000001"})
    assert err.value.status_code == 402
    assert err.value.body["code"] == "cost_limit_exceeded"


def test_long_conversation_is_compressed_by_the_summarizer(
    client: openai.OpenAI, fake: FakeUpstream, gw: GatewayProcess
) -> None:
    graded = fake.stats().get(GRADER, 0)
    raw = client.chat.completions.with_raw_response.create(
        model="weak", messages=LONG_CONVERSATION, extra_headers={"x-costgate-tags": "compressed"}
    )
    saved = int(raw.headers["x-costgate-compressed-tokens"])
    assert saved > 100
    completion = raw.parse()
    assert completion.choices[0].message.content == "3 + 4 = 7\n#### 7"  # the last turn survived
    assert fake.stats()[GRADER] == graded + 1  # the summary was a real call...
    compressed_prompt = [
        LONG_CONVERSATION[0],
        {"role": "system", "content": SUMMARY_PREFIX + SUMMARY},
        *LONG_CONVERSATION[-2:],
    ]
    from gateway.core.tokens import count_messages

    assert completion.usage.prompt_tokens == count_messages(compressed_prompt)  # ...and its summary was sent
    answer_cost = cost_of(completion.usage.prompt_tokens, completion.usage.completion_tokens, "0.6", "0.6")
    assert Decimal(raw.headers["x-costgate-cost-usd"]) > answer_cost  # the summary call is charged too
    short = client.chat.completions.with_raw_response.create(model="weak", messages=LONG_CONVERSATION[-3:])
    assert "x-costgate-compressed-tokens" not in short.headers
    assert 'costgate_compression_tokens_saved_total{model="weak"}' in httpx.get(gw.url + "/metrics").text
