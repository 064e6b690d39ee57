"""Upstream faults the well-behaved fake cannot make (tests/gateway/test_errors.py covers the
rest): resets before and during an answer, stalls, a body dripped forever, streams cut or
stalled mid-way, 502/503, a 429 asking for an hour. Every one ends in an OpenAI-shaped
502/503/504/429 (never a bare 500, never a hang), retries stay capped, fallbacks engage, and the
ledger charges only what an upstream really produced."""

from __future__ import annotations

import concurrent.futures
import sqlite3
from collections.abc import Iterator
from decimal import Decimal

import httpx
import openai
import pytest

from tests.reliability.services import FaultyUpstreamProcess
from tests.support import GatewayProcess, model

pytestmark = pytest.mark.slow  # boots processes: not in the fast lane

ONE_CALL_USD = Decimal("0.000045")  # the faulty upstream's usage (10 in, 5 out) at $1.5/$6 per Mtok
HI = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory, faulty: FaultyUpstreamProcess) -> Iterator[GatewayProcess]:
    base = faulty.url
    quick = {"timeout_s": 0.5, "max_retries": 0}
    models = [
        model("ok", "ok", base),
        model("s502", "status-502", base),
        model("s503", "status-503", base),
        model("s503-fb", "status-503", base, fallbacks=["ok"]),
        model("s429-long", "status-429-long", base),
        model("s429-long-fb", "status-429-long", base, fallbacks=["ok"]),
        model("flaky-503", "flaky-503", base),
        model("reset-before", "reset-before", base),
        model("reset-before-fb", "reset-before", base, fallbacks=["ok"]),
        model("reset-mid", "reset-mid", base),
        model("slow-headers", "slow-headers", base, **quick),
        model("slow-headers-fb", "slow-headers", base, fallbacks=["ok"], **quick),
        model("drip-body", "drip-body", base, **quick),
        model("html-stream", "html-stream", base),
        model("stream-reset", "stream-reset", base),
        model("stream-stall", "stream-stall", base, **quick),
        model("stream-garbage", "stream-garbage", base),
        model("refused", "ok", "http://127.0.0.1:9/v1", max_retries=1, connect_timeout_s=1),
        model("refused-fb", "ok", "http://127.0.0.1:9/v1", fallbacks=["ok"], connect_timeout_s=1),
        model("brk", "status-500-brk", base, fallbacks=["ok"], max_retries=0),
        model("brk-solo", "status-502-solo", base, max_retries=0),
    ]
    breaker = {"min_requests": 4, "max_error_rate": 0.5, "window_s": 60, "open_s": 30}
    # These tests count each request's upstream calls and charges: a repeated question must reach
    # the upstream, not the exact cache (which serves requests without a temperature).
    gateway = GatewayProcess(
        {"models": models, "breaker": breaker, "cache": {"exact": {"enabled": False}}},
        tmp_path_factory.mktemp("gw-faults"),
    )
    yield gateway
    gateway.stop()


@pytest.fixture(scope="module")
def key(gw: GatewayProcess) -> str:
    return gw.new_key("faults")


def ask(gw: GatewayProcess, key: str, model_name: str, stream: bool = False, timeout: float = 20) -> httpx.Response:
    return httpx.post(
        gw.url + "/v1/chat/completions",
        timeout=timeout,
        headers={"authorization": f"Bearer {key}"},
        json={"model": model_name, "messages": HI, "stream": stream},
    )


def ledger_row(gw: GatewayProcess, request_id: str) -> dict:
    gw.spend()  # flushes the ledger writer
    with sqlite3.connect(gw.workdir / "costgate.db") as db:
        db.row_factory = sqlite3.Row
        row = db.execute("SELECT * FROM ledger WHERE request_id = ?", (request_id,)).fetchone()
    assert row is not None, f"no ledger row for {request_id}"
    return dict(row)


def usd(pusd: int) -> Decimal:
    return Decimal(pusd) / Decimal(10**12)


@pytest.mark.parametrize(
    "name, status, code, calls",
    [
        ("s502", 502, "bad_gateway", 3),  # one call, two retries
        ("s503", 502, "bad_gateway", 3),
        ("s429-long", 429, "upstream_rate_limited", 1),  # an hour's retry-after is not waited out
        ("reset-before", 502, None, 1),  # a reset POST may have run upstream: not retried, never double-paid
        ("reset-mid", 502, None, 1),
        ("slow-headers", 504, "upstream_timeout", 1),
        ("drip-body", 504, "upstream_timeout", 1),  # each byte in time, the whole answer not
        ("html-stream", 502, "bad_upstream_body", 1),
    ],
)
def test_a_failing_upstream_gives_an_openai_error_quickly(
    gw: GatewayProcess, faulty: FaultyUpstreamProcess, key: str, name: str, status: int, code: str | None, calls: int
) -> None:
    upstream = next(m["model"] for m in gw.config["models"] if m["name"] == name)
    before = faulty.stats().get(upstream, 0)
    # The client's 20 s timeout is shorter than the fakes' stalls (30 s, 60 s): a gateway that
    # waited them out fails here with httpx.ReadTimeout; the status says the gateway gave up itself.
    response = ask(gw, key, name, stream=name.endswith("-stream"))
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["message"] and error["type"] in ("upstream_error", "rate_limit_error")
    if code:
        assert error["code"] == code
    assert faulty.stats()[upstream] - before == calls
    row = ledger_row(gw, response.headers["x-costgate-request-id"])
    if code == "bad_upstream_body":  # a 200 the gateway cannot read: billed, so charged its worst case
        assert Decimal(response.headers["x-costgate-cost-usd"]) > 0
        assert row["status"] == status and usd(row["cost_pusd"]) == Decimal(response.headers["x-costgate-cost-usd"])
    else:
        assert response.headers["x-costgate-cost-usd"] == "0"
        assert (row["status"], row["cost_pusd"]) == (status, 0)


def test_an_unreachable_upstream_is_retried_then_502(gw: GatewayProcess, key: str) -> None:
    response = ask(gw, key, "refused")
    assert response.status_code == 502
    assert response.json()["error"]["code"] == "upstream_unreachable"


@pytest.mark.parametrize("name", ["s503-fb", "s429-long-fb", "reset-before-fb", "slow-headers-fb", "refused-fb"])
def test_fallbacks_engage_and_only_the_answering_call_is_charged(gw: GatewayProcess, key: str, name: str) -> None:
    raw = gw.client(key).chat.completions.with_raw_response.create(model=name, messages=HI)
    assert raw.parse().choices[0].message.content == "the quick brown fox jumps"
    assert raw.headers["x-costgate-model"] == "ok"
    assert Decimal(raw.headers["x-costgate-cost-usd"]) == ONE_CALL_USD
    row = ledger_row(gw, raw.headers["x-costgate-request-id"])
    assert (row["requested_model"], row["served_model"], row["status"]) == (name, "ok", 200)
    assert usd(row["cost_pusd"]) == ONE_CALL_USD


def test_a_retried_call_is_charged_once(gw: GatewayProcess, faulty: FaultyUpstreamProcess, key: str) -> None:
    before = faulty.stats().get("flaky-503", 0)
    raw = gw.client(key).chat.completions.with_raw_response.create(model="flaky-503", messages=HI)
    assert faulty.stats()["flaky-503"] - before == 2  # a 503, then the answer
    assert Decimal(raw.headers["x-costgate-cost-usd"]) == ONE_CALL_USD
    assert usd(ledger_row(gw, raw.headers["x-costgate-request-id"])["cost_pusd"]) == ONE_CALL_USD


@pytest.mark.parametrize(
    "name, code",
    [
        ("stream-reset", "truncated_stream"),
        ("stream-stall", "upstream_timeout"),
        ("stream-garbage", "bad_upstream_stream"),
    ],
)
def test_a_stream_cut_midway_ends_with_an_error_event_and_charges_what_was_sent(
    gw: GatewayProcess, key: str, name: str, code: str
) -> None:
    with httpx.stream(
        "POST",
        gw.url + "/v1/chat/completions",
        headers={"authorization": f"Bearer {key}"},
        json={"model": name, "messages": HI, "stream": True},
        timeout=20,  # shorter than the stall's 60 s: a gateway that waited it out fails with ReadTimeout
    ) as response:
        assert response.status_code == 200  # the headers left before the fault
        lines = [line for line in response.iter_lines() if line.startswith("data: ")]
        request_id = response.headers["x-costgate-request-id"]
    assert "data: [DONE]" not in lines
    last = httpx.Response(200, content=lines[-1][6:]).json()
    assert last["error"]["code"] == code and last["error"]["message"]
    # The SDK surfaces the error event as an exception rather than a silent short answer.
    with pytest.raises(openai.APIError):
        for _ in gw.client(key).chat.completions.create(model=name, messages=HI, stream=True):
            pass
    row = ledger_row(gw, request_id)
    assert row["status"] == 502 or row["status"] == 504
    assert row["completion_tokens"] >= 1 and row["cost_pusd"] > 0  # the words that did arrive


def test_faults_under_concurrency_never_hang_or_500_and_the_gateway_recovers(gw: GatewayProcess, key: str) -> None:
    names = ["s502", "reset-before", "reset-mid", "slow-headers", "stream-reset", "ok", "s503-fb", "flaky-503"] * 6

    def one(name: str) -> int:
        return ask(gw, key, name, stream=name.startswith("stream"), timeout=30).status_code

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        statuses = list(pool.map(one, names))
    assert 500 not in statuses
    assert set(statuses) <= {200, 502, 503, 504}  # 503: a breaker opened
    assert statuses.count(200) >= names.count("ok") + names.count("s503-fb") + names.count("flaky-503")
    assert httpx.get(gw.url + "/healthz").status_code == 200
    assert gw.client(key).chat.completions.create(model="ok", messages=HI).choices


def test_a_breaker_opens_and_the_fallback_answers_without_calling_the_broken_upstream(
    gw: GatewayProcess, faulty: FaultyUpstreamProcess, key: str
) -> None:
    before = faulty.stats().get("status-500-brk", 0)
    for _ in range(8):
        raw = gw.client(key).chat.completions.with_raw_response.create(model="brk", messages=HI)
        assert raw.headers["x-costgate-model"] == "ok"
        assert Decimal(raw.headers["x-costgate-cost-usd"]) == ONE_CALL_USD
    assert faulty.stats()["status-500-brk"] - before == 4  # then the breaker opened: no more calls


def test_an_open_breaker_without_fallback_answers_503_with_retry_after(
    gw: GatewayProcess, faulty: FaultyUpstreamProcess, key: str
) -> None:
    statuses = [ask(gw, key, "brk-solo").status_code for _ in range(4)]
    assert statuses == [502] * 4
    response = ask(gw, key, "brk-solo")
    assert response.status_code == 503 and response.json()["error"]["code"] == "circuit_open"
    assert int(response.headers["retry-after"]) >= 1
    assert faulty.stats()["status-502-solo"] == 4
