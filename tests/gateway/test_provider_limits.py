"""A model's provider limits are shared by every team (config `provider_limits`): the provider
rate-limits the key, not the team, so one team's flood used to leave every other team the
provider's 429s. Now the gateway counts the key's limits itself: no team takes more than its
share (`team_share`, half by default), and the whole is refused by the gateway, with a
retry-after, before the provider is asked. On the in-memory store, and on Redis across two
gateways (replicas count the same minute)."""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path

import httpx
import pytest

from tests.gateway.budget_support import SHARED_REDIS, redis_prefix
from tests.gateway.in_process import chat_answer, http_client, new_key, openai_model, running_app, settings_for

LIMITED = openai_model("shared", provider_limits={"requests_per_minute": 4, "tokens_per_minute": 100_000})


def upstream(asked: list[httpx.Request], prompt: int = 5) -> httpx.MockTransport:
    def answer(request: httpx.Request) -> httpx.Response:
        asked.append(request)
        return httpx.Response(200, json=chat_answer(prompt=prompt, completion=2))

    return httpx.MockTransport(answer)


async def ask(app: object, key: str) -> httpx.Response:
    async with http_client(app) as http:
        return await http.post(
            "/v1/chat/completions",
            json={"model": "shared", "messages": [{"role": "user", "content": "hi"}]},
            headers={"authorization": f"Bearer {key}"},
        )


async def test_no_team_takes_more_than_its_share_and_the_whole_is_refused_here(tmp_path: Path) -> None:
    asked: list[httpx.Request] = []
    async with running_app(settings_for(tmp_path, [LIMITED]), upstream(asked)) as app:
        a, b, c = [await new_key(app, team=t) for t in ("flood", "steady", "late")]
        first = await ask(app, a)
        assert first.status_code == 200
        assert first.headers["x-ratelimit-limit-requests"] == "2"  # its share is the tightest limit it has
        assert (await ask(app, a)).status_code == 200
        over = await ask(app, a)  # the flood's third request in the minute: over its half
        assert over.status_code == 429 and int(over.headers["retry-after"]) >= 1
        assert over.json()["error"]["message"] == (
            "rate limit reached: this team's share of model 'shared''s provider limit, 2 requests per minute"
        )
        assert [(await ask(app, b)).status_code for _ in range(2)] == [200, 200]  # the other half is left
        late = await ask(app, c)  # the key's whole minute is used: refused here, not by the provider
        assert late.status_code == 429 and "all teams' use" in late.json()["error"]["message"]
    assert len(asked) == 4


async def test_a_teams_token_share_counts_the_tokens_it_used(tmp_path: Path) -> None:
    """Tokens are counted at admission from an estimate and corrected to the upstream's usage at
    settle, as for any token limit: 400-token answers fill a 1,000 x 0.5 share in two."""
    asked: list[httpx.Request] = []
    tokens = openai_model("shared", provider_limits={"tokens_per_minute": 1000})
    async with running_app(settings_for(tmp_path, [tokens]), upstream(asked, prompt=398)) as app:
        key, other = await new_key(app, team="flood"), await new_key(app, team="steady")
        assert [(await ask(app, key)).status_code for _ in range(3)] == [200, 200, 429]
        assert (await ask(app, other)).status_code == 200
    assert len(asked) == 3


async def test_replicas_share_the_providers_minute_on_redis(tmp_path: Path) -> None:
    asked: list[httpx.Request] = []
    with redis_prefix() as prefix:
        extra = {
            "redis_url": SHARED_REDIS,
            "budgets": {"redis_prefix": prefix},
            "database_url": f"sqlite:///{tmp_path}/shared.sqlite",  # one ledger and key table, as replicas have
        }
        async with AsyncExitStack() as stack:
            replicas = [
                await stack.enter_async_context(
                    running_app(settings_for(tmp_path / name, [LIMITED], **extra), upstream(asked))
                )
                for name in ("a", "b")
            ]
            keys = [await new_key(replicas[0], team=t) for t in ("flood", "steady")]
            flood = [(await ask(replicas[i % 2], keys[0])).status_code for i in range(3)]
            assert flood == [200, 200, 429]  # its half, counted across both replicas
            assert [(await ask(replicas[i % 2], keys[1])).status_code for i in range(3)] == [200, 200, 429]
    assert len(asked) == 4


@pytest.mark.parametrize("share", [0, 1.5])
def test_a_share_is_a_fraction_of_the_limit(tmp_path: Path, share: float) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        settings_for(tmp_path, [openai_model("m", provider_limits={"requests_per_minute": 4, "team_share": share})])
