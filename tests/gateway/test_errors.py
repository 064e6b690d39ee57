"""Every error path answers in OpenAI's error shape with the right status, gets its ledger
row, and leaves the gateway serving."""

from __future__ import annotations

from decimal import Decimal

import httpx
import openai
import pytest

from tests.support import GatewayProcess

pytestmark = pytest.mark.slow  # boots processes: not in the fast lane

HI = [{"role": "user", "content": "hi"}]


def post(gateway: GatewayProcess, key: str, content: bytes | str, **headers: str) -> httpx.Response:
    return httpx.post(
        gateway.url + "/v1/chat/completions",
        content=content,
        timeout=30,
        headers={"authorization": f"Bearer {key}", "content-type": "application/json", **headers},
    )


def assert_openai_error(response: httpx.Response, status: int, request_id: bool = True) -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) >= {"message", "type", "code"} and error["message"]
    if request_id:
        assert response.headers["x-costgate-request-id"].startswith("req_")
    return error


@pytest.mark.parametrize(
    "body, param",
    [
        (b"{not json", None),
        (b"\xff\xfe{}", None),  # invalid UTF-8
        (b"[1, 2]", None),
        (b'{"model": "small"}', "messages"),
        (b'{"model": 5, "messages": []}', "model"),
        (b'{"model": "small", "messages": "hi"}', "messages"),
        (b'{"model": "small", "messages": [{"role": "wizard", "content": "x"}]}', "messages.0.role"),
        (b'{"model": "small", "messages": [{"role": "user", "content": "x"}], "max_tokens": -1}', "max_tokens"),
        (b'{"model": "small", "messages": [{"role": "user", "content": "x"}], "temperature": "hot"}', "temperature"),
        (b'{"model": "small", "messages": [{"role": "user", "content": "x"}], "n": 0}', "n"),
    ],
)
def test_bad_bodies_are_400(gateway: GatewayProcess, key: str, body: bytes, param: str | None) -> None:
    error = assert_openai_error(post(gateway, key, body), 400)
    assert error["type"] == "invalid_request_error"
    if param:
        assert error["param"] == param


def test_oversized_body_is_413(gateway: GatewayProcess, key: str) -> None:
    big = '{"model": "small", "messages": [{"role": "user", "content": "' + "x" * (5 * 1024 * 1024) + '"}]}'
    error = assert_openai_error(post(gateway, key, big), 413)
    assert error["code"] == "request_too_large"


@pytest.mark.parametrize(
    "model, status, code, billed",
    [
        ("always-500", 502, "bad_gateway", False),
        ("always-429", 429, "upstream_rate_limited", False),
        # a 200 the gateway cannot read was billed by the provider: charged at its worst case
        ("html", 502, "bad_upstream_body", True),
        ("garbage", 502, "bad_upstream_body", True),
        ("reject", 400, "upstream_invalid_request", False),
        ("slow", 504, "upstream_timeout", False),
    ],
)
def test_upstream_failures_map_to_clear_errors(
    gateway: GatewayProcess, key: str, model: str, status: int, code: str, billed: bool
) -> None:
    response = post(gateway, key, f'{{"model": "{model}", "messages": [{{"role": "user", "content": "x"}}]}}')
    error = assert_openai_error(response, status)
    assert error["code"] == code
    assert (Decimal(response.headers["x-costgate-cost-usd"]) > 0) is billed


def test_retries_are_capped_at_two(gateway: GatewayProcess, fake_upstream, key: str) -> None:
    before = fake_upstream.stats().get("fail-500", 0)
    post(gateway, key, '{"model": "always-500", "messages": [{"role": "user", "content": "x"}]}')
    assert fake_upstream.stats()["fail-500"] - before == 3  # one call and two retries


def test_a_flaky_upstream_is_retried_into_success(gateway: GatewayProcess, fake_upstream, key: str) -> None:
    before = fake_upstream.stats().get("flaky", 0)
    for i in range(3):  # the fake fails the first of every three calls
        # Each question once: a repeated one would be answered by the exact cache, not the upstream.
        raw = gateway.client(key).chat.completions.with_raw_response.create(
            model="flaky", messages=[{"role": "user", "content": f"flaky question {i}"}]
        )
        answer = raw.parse()
        assert answer.choices[0].message.content == f"echo: flaky question {i}"
        assert raw.headers["x-costgate-cache"] == "miss"
        # charged for the call that answered (flaky: $1.5 / $6 per million), not the one that failed
        usage = answer.usage
        assert (
            Decimal(raw.headers["x-costgate-cost-usd"])
            == (usage.prompt_tokens * Decimal("1.5") + usage.completion_tokens * 6) / 1_000_000
        )
    # three answers took four or five calls: every failure was retried, none reached the client
    assert 4 <= fake_upstream.stats()["flaky"] - before <= 5


def test_truncated_stream_ends_with_an_error_and_is_charged(gateway: GatewayProcess, key: str) -> None:
    stream = gateway.client(key).chat.completions.create(
        model="truncate", stream=True, messages=[{"role": "user", "content": "one two three four five"}]
    )
    received = []
    with pytest.raises(openai.APIError) as err:
        for chunk in stream:
            received.append(chunk.choices[0].delta.content)
    assert received == ["echo: ", "one "]
    assert "without [DONE]" in str(err.value)


def test_upstream_without_usage_is_charged_by_token_count(gateway: GatewayProcess, key: str) -> None:
    raw = gateway.client(key).chat.completions.with_raw_response.create(
        model="no-usage", messages=[{"role": "user", "content": "count these tokens"}]
    )
    assert raw.parse().usage is None
    assert float(raw.headers["x-costgate-cost-usd"]) > 0


def test_unknown_route_and_method_are_openai_errors(gateway: GatewayProcess) -> None:
    error = assert_openai_error(httpx.get(gateway.url + "/v1/nope"), 404, request_id=False)
    assert error["message"] == "Invalid URL (GET /v1/nope)"  # OpenAI's words: which URL, not just "Not Found"
    error = assert_openai_error(httpx.get(gateway.url + "/v1/chat/completions"), 405, request_id=False)
    assert error["message"] == "Invalid URL (GET /v1/chat/completions): the method is not allowed there (allowed: POST)"


def test_failures_are_in_the_ledger_and_the_gateway_keeps_serving(gateway: GatewayProcess, key: str) -> None:
    before = {r["group"]: r["requests"] for r in gateway.spend("model")["rows"]}
    post(gateway, key, b"{broken")
    post(gateway, key, '{"model": "always-500", "messages": [{"role": "user", "content": "x"}]}')
    after = {r["group"]: r["requests"] for r in gateway.spend("model")["rows"]}
    assert after.get(None, 0) == before.get(None, 0) + 1  # the unreadable body: no model known
    assert after.get("always-500", 0) == before.get("always-500", 0) + 1
    assert (
        gateway.client(key).chat.completions.create(model="small", messages=HI).choices[0].message.content == "echo: hi"
    )
