"""The authenticate stage: the key resolves to a principal, then the model must exist and be
allowed for that key. The key store is faked at its one method."""

from __future__ import annotations

import dataclasses

import pytest

from gateway.core.context import Principal
from gateway.core.errors import AuthenticationFailed, NotFound, PermissionDenied
from gateway.stages.authenticate import Authenticate
from tests.gateway.fakes import TEAM_A, request

MODELS = frozenset({"small", "large", "auto"})


class FakeKeys:
    """A key store that knows one secret."""

    def __init__(self, secret: str, principal: Principal) -> None:
        self.secret, self.principal = secret, principal
        self.asked: list[str | None] = []

    async def authenticate(self, secret: str | None) -> Principal:
        self.asked.append(secret)
        if secret != self.secret:
            raise AuthenticationFailed("invalid API key")
        return self.principal


def stage(principal: Principal = TEAM_A) -> tuple[Authenticate, FakeKeys]:
    keys = FakeKeys("sk-cg-secret", principal)
    return Authenticate(keys, MODELS), keys  # type: ignore[arg-type]


async def test_a_known_key_becomes_the_principal() -> None:
    auth, keys = stage()
    ctx = request({"model": "large", "messages": []})
    assert await auth(ctx) is None
    assert ctx.principal == TEAM_A
    assert keys.asked == ["sk-cg-secret"]


@pytest.mark.parametrize("api_key", [None, "sk-cg-wrong"])
async def test_an_unknown_or_missing_key_is_refused_before_the_model_is_looked_at(api_key: str | None) -> None:
    auth, _ = stage()
    ctx = request({"model": "no-such-model", "messages": []}, api_key=api_key)
    with pytest.raises(AuthenticationFailed) as refused:
        await auth(ctx)
    assert refused.value.status == 401
    assert ctx.principal is None  # nothing later may treat the caller as known


async def test_an_unknown_model_is_404_model_not_found_on_param_model() -> None:
    auth, _ = stage()
    ctx = request({"model": "gpt-9", "messages": []})
    with pytest.raises(NotFound) as refused:
        await auth(ctx)
    err = refused.value
    assert (err.status, err.code, err.param) == (404, "model_not_found", "model")
    assert "gpt-9" in err.message


@pytest.mark.parametrize(
    "allowed, model, ok",
    [
        (None, "large", True),
        (frozenset({"small"}), "small", True),
        (frozenset({"small"}), "large", False),
        (frozenset(), "small", False),
    ],
)
async def test_a_key_limited_to_some_models_may_use_only_those(
    allowed: frozenset[str] | None, model: str, ok: bool
) -> None:
    auth, _ = stage(dataclasses.replace(TEAM_A, allowed_models=allowed))
    ctx = request({"model": model, "messages": []})
    if ok:
        assert await auth(ctx) is None
        return
    with pytest.raises(PermissionDenied) as refused:
        await auth(ctx)
    err = refused.value
    assert (err.status, err.code, err.param) == (403, "model_not_allowed", "model")


async def test_a_batch_line_arrives_resolved_and_the_key_store_is_not_asked_again() -> None:
    auth, keys = stage()
    owner = dataclasses.replace(TEAM_A, key_id="key_batch")
    ctx = request(api_key=None, principal=owner)
    assert await auth(ctx) is None
    assert ctx.principal is owner and keys.asked == []


async def test_a_resolved_principal_is_still_held_to_its_models() -> None:
    auth, _ = stage()
    ctx = request(
        {"model": "large", "messages": []},
        api_key=None,
        principal=dataclasses.replace(TEAM_A, allowed_models=frozenset({"small"})),
    )
    with pytest.raises(PermissionDenied):
        await auth(ctx)
