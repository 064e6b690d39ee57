"""The semantic cache stage over the real response cache with a table of vectors
(tests/gateway/stages/cache_support.py): the hit that needs the verifier's consent, not just a
near vector, and the requests it never embeds."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.core.asked import CacheControl
from gateway.core.context import CacheStatus, RequestContext
from tests.gateway.fakes import TEAM_A, request
from tests.gateway.stages.cache_support import SAVED, answered, ask, cache, lookups, stages


async def test_a_paraphrase_in_the_same_words_is_served_from_the_semantic_cache() -> None:
    c = cache(semantic=True, topics={"What is the capital of France?": 1, "what is the capital of france": 1})
    exact, semantic = stages(c)
    first = ask()
    await exact(first)
    assert await semantic(first) is None
    await exact.settle(answered(first))
    assert c.embedded == ["What is the capital of France?"]  # the lookup's vector is reused to store
    again = ask("what is the capital of france")
    assert await exact(again) is None  # not the exact request
    response = await semantic(again)
    assert response is not None and b"Paris." in response.body
    assert again.outcome.cache_status is CacheStatus.SEMANTIC and again.meter.saved == SAVED and again.meter.cost == 0
    assert lookups(c, "semantic", "hit") == 1


async def test_a_near_vector_is_not_enough_when_the_verifier_refuses() -> None:
    # Same vector (cosine 1), but the questions name different places: the verifier vetoes.
    c = cache(semantic=True, topics={"What is the capital of France?": 1, "What is the capital of Germany?": 1})
    exact, semantic = stages(c)
    first = ask()
    await exact(first)
    await semantic(first)
    await exact.settle(answered(first))
    other = ask("What is the capital of Germany?")
    await exact(other)
    assert await semantic(other) is None and other.outcome.cache_status is CacheStatus.MISS
    assert lookups(c, "semantic", "miss") == 2


TOOL = {"type": "function", "function": {"name": "Bash", "parameters": {"type": "object"}}}
TURNS = [{"role": r, "content": f"turn {i}"} for i, r in enumerate(["user", "assistant"] * 3)]


@pytest.mark.parametrize(
    "first, paraphrase",
    [
        (ask(tools=[TOOL]), ask("what is the capital of france", tools=[TOOL])),
        (
            request(
                {"model": "small", "messages": [*TURNS, {"role": "user", "content": "What is the capital of France?"}]},
                principal=TEAM_A,
                requested_model="small",
            ),
            request(
                {"model": "small", "messages": [*TURNS, {"role": "user", "content": "what is the capital of france"}]},
                principal=TEAM_A,
                requested_model="small",
            ),
        ),
    ],
    ids=["tools", "long history"],
)
async def test_an_agents_turn_is_never_answered_by_meaning(first: RequestContext, paraphrase: RequestContext) -> None:
    """Issue 29: with tools offered or a long history, a paraphrase is not served from the
    semantic cache (nor is the answer kept by meaning); the exact request still is."""
    c = cache(semantic=True, topics={"What is the capital of France?": 1, "what is the capital of france": 1})
    exact, semantic = stages(c)
    await exact(first)
    assert await semantic(first) is None
    await exact.settle(answered(first))
    await exact(paraphrase)
    assert await semantic(paraphrase) is None and paraphrase.outcome.cache_status is CacheStatus.MISS
    assert c.embedded == []


@pytest.mark.parametrize(
    "case, ctx, config",
    [
        ("semantic off for the team", ask(), {"teams": {"team-a": {"semantic": False}}}),
        ("no decision", ask(temperature=0.9), {}),
        ("no-cache", ask(control=CacheControl.NO_CACHE), {}),
        (
            "no question",
            request(
                {
                    "model": "small",
                    "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:,"}}]}],
                },
                principal=TEAM_A,
                requested_model="small",
            ),
            {},
        ),
    ],
)
async def test_requests_the_semantic_cache_skips_are_never_embedded(
    case: str, ctx: RequestContext, config: dict[str, Any]
) -> None:
    c = cache(semantic=True, **config)
    exact, semantic = stages(c)
    await exact(ctx)
    assert await semantic(ctx) is None
    assert c.embedded == []
