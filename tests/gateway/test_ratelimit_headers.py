"""Rate-limit headers (issue 28 item 2): a key on a plan with per-minute limits gets OpenAI's
`x-ratelimit-*` headers (Anthropic's `anthropic-ratelimit-*` on /v1/messages), on success and
on the 429; a key without such limits gets none. Through the official SDKs; the counts come from
the same store call that admits the request, in memory and in Redis."""

from __future__ import annotations

import datetime
import secrets
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import httpx
import openai
import pytest

from gateway.stages.ratelimit import duration
from policies.rate_limits import Headroom
from tests.gateway.in_process import (
    anthropic_client,
    chat_answer,
    new_key,
    openai_client,
    openai_model,
    running_app,
    settings_for,
)

HI = [{"role": "user", "content": "hi"}]
RPM, TPM = 3, 100_000


@pytest.fixture(scope="module", params=["memory", "redis"])
async def app(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Any]:
    upstream = httpx.MockTransport(lambda r: httpx.Response(200, json=chat_answer(prompt=5, completion=2)))
    extra: dict[str, Any] = {"plans": {"pro": {"requests_per_minute": RPM, "tokens_per_minute": TPM}}}
    if request.param == "redis":
        extra["redis_url"] = "redis://127.0.0.1:6379/0"
        extra["budgets"] = {"backend": "redis", "redis_prefix": f"cgtest-{secrets.token_hex(4)}:"}
    settings = settings_for(tmp_path_factory.mktemp("rl"), [openai_model("m")], **extra)
    async with running_app(settings, upstream) as app:
        yield app


async def test_openai_headers_count_down_then_the_429_carries_them(app: Any) -> None:
    client = openai_client(app, await new_key(app, "team-rl", plan="pro"))
    remaining = []
    for _ in range(RPM):
        raw = await client.chat.completions.with_raw_response.create(model="m", messages=HI)
        h = raw.headers
        assert h["x-ratelimit-limit-requests"] == str(RPM)
        assert h["x-ratelimit-limit-tokens"] == str(TPM)
        assert int(h["x-ratelimit-remaining-tokens"]) < TPM
        assert h["x-ratelimit-reset-requests"].endswith("s") and h["x-ratelimit-reset-tokens"].endswith("s")
        remaining.append(int(h["x-ratelimit-remaining-requests"]))
    assert remaining == [RPM - 1, RPM - 2, RPM - 3]
    with pytest.raises(openai.RateLimitError) as err:
        await client.chat.completions.create(model="m", messages=HI)
    h = err.value.response.headers
    assert h["x-ratelimit-limit-requests"] == str(RPM) and h["x-ratelimit-remaining-requests"] == "0"
    assert int(h["retry-after"]) >= 1


async def test_anthropic_headers_on_messages(app: Any) -> None:
    client = anthropic_client(app, await new_key(app, "team-rl-a", plan="pro"))
    raw = await client.messages.with_raw_response.create(model="m", max_tokens=10, messages=HI)
    h = raw.headers
    assert h["anthropic-ratelimit-requests-limit"] == str(RPM)
    assert h["anthropic-ratelimit-requests-remaining"] == str(RPM - 1)
    assert h["anthropic-ratelimit-tokens-limit"] == str(TPM)
    reset = datetime.datetime.fromisoformat(h["anthropic-ratelimit-requests-reset"])
    now = datetime.datetime.now(datetime.UTC)
    assert now - datetime.timedelta(seconds=2) <= reset <= now + datetime.timedelta(seconds=61)
    assert "x-ratelimit-limit-requests" not in h  # Anthropic's names only
    for _ in range(RPM - 1):
        await client.messages.create(model="m", max_tokens=10, messages=HI)
    with pytest.raises(anthropic.RateLimitError) as err:
        await client.messages.create(model="m", max_tokens=10, messages=HI)
    assert err.value.response.headers["anthropic-ratelimit-requests-remaining"] == "0"


async def test_no_per_minute_limit_no_headers(app: Any) -> None:
    client = openai_client(app, await new_key(app, "team-free-of-limits", plan="enterprise"))
    response = await client.chat.completions.with_raw_response.create(model="m", messages=HI)
    assert not [h for h in response.headers if h.startswith("x-ratelimit")]


@pytest.mark.parametrize("seconds, text", [(0.2, "1s"), (17.0, "17s"), (17.01, "18s"), (60.0, "1m0s"), (61.5, "1m2s")])
def test_reset_durations_read_as_openais(seconds: float, text: str) -> None:
    assert duration(Headroom(1, 0, seconds)) == text
