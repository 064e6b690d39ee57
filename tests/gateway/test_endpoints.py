"""The other OpenAI endpoints, litellm providers, metrics and health."""

from __future__ import annotations

from decimal import Decimal

import httpx
import pytest

from tests.support import GatewayProcess, model

pytestmark = pytest.mark.slow  # boots processes: not in the fast lane


def test_embeddings_are_charged_for_input_only(gateway: GatewayProcess, key: str) -> None:
    raw = gateway.client(key).embeddings.with_raw_response.create(model="small", input=["alpha beta", "gamma"])
    response = raw.parse()
    assert len(response.data) == 2
    expected = response.usage.prompt_tokens * Decimal("0.15") / 10**6
    assert Decimal(raw.headers["x-costgate-cost-usd"]) == expected


def test_completions_plain_and_streamed(gateway: GatewayProcess, key: str) -> None:
    client = gateway.client(key)
    done = client.completions.create(model="small", prompt="say this")
    assert done.choices[0].text == "echo: say this"
    chunks = list(
        client.completions.create(model="small", prompt="say that", stream=True, stream_options={"include_usage": True})
    )
    assert "".join(c.choices[0].text for c in chunks if c.choices) == "echo: say that"
    assert Decimal(chunks[-1].usage.model_extra["cost_usd"]) > 0


def test_metrics_count_requests_tokens_and_cost(gateway: GatewayProcess, key: str) -> None:
    gateway.client(key).chat.completions.create(model="large", messages=[{"role": "user", "content": "m"}])
    text = httpx.get(gateway.url + "/metrics").text
    for name in (
        "costgate_requests_total",
        "costgate_tokens_total",
        "costgate_cost_usd_total",
        "costgate_request_latency_seconds_bucket",
        "costgate_upstream_errors_total",
    ):
        assert name in text, name
    assert 'costgate_requests_total{cache="miss",model="large",status="200",team="team-a"}' in text


def test_health_and_readiness(gateway: GatewayProcess) -> None:
    assert httpx.get(gateway.url + "/healthz").json() == {"status": "ok"}
    assert httpx.get(gateway.url + "/readyz").json()["status"] == "ready"


@pytest.fixture(scope="module")
def anthropic_gateway(tmp_path_factory, fake_upstream):
    root = fake_upstream.url.removesuffix("/v1")
    claude = {
        "name": "claude",
        "provider": "litellm",
        "model": "anthropic/claude-haiku-4-5",
        "api_base": root,
        "api_key": "fake-anthropic-key",
    }
    gw = GatewayProcess(
        {"models": [claude, model("small", "echo-small", fake_upstream.url)]}, tmp_path_factory.mktemp("anthropic")
    )
    yield gw
    gw.stop()


def test_litellm_provider_reaches_an_anthropic_api(anthropic_gateway: GatewayProcess) -> None:
    key = anthropic_gateway.new_key("team-claude")
    raw = anthropic_gateway.client(key).chat.completions.with_raw_response.create(
        model="claude", messages=[{"role": "user", "content": "hello claude"}]
    )
    completion = raw.parse()
    assert completion.choices[0].message.content == "echo: hello claude"
    usage = completion.usage
    # claude-haiku-4-5 from litellm's bundled map: $1 in, $5 out per million tokens
    expected = usage.prompt_tokens * Decimal("0.000001") + usage.completion_tokens * Decimal("0.000005")
    assert Decimal(raw.headers["x-costgate-cost-usd"]) == expected
