"""What the unit tests of stages and routing share: a request context as a route builds it, a caller,
and deployments whose upstream is faked at the provider interface."""

from __future__ import annotations

import dataclasses
from decimal import Decimal
from typing import Any

import orjson
from starlette.datastructures import Headers

from gateway.config.models_config import ModelConfig
from gateway.core.asked import Asked
from gateway.core.context import Endpoint, Outcome, Principal, RequestContext
from gateway.core.meter import Meter
from gateway.metrics import Metrics
from gateway.providers.base import Completion, Provider, UpstreamCall, UpstreamStream
from gateway.routing.guarded_call import Upstream
from gateway.upstream.deployments import Deployment
from policies.breaker import BreakerConfig, Breakers
from policies.pricing import Price, Usage

TEAM_A = Principal(team_id="team_a1", team_name="team-a", key_id="key_a1")
TEAM_B = Principal(team_id="team_b1", team_name="team-b", key_id="key_b1")


def request(
    body: dict[str, Any] | None = None,
    *,
    headers: dict[str, str] | None = None,
    endpoint: Endpoint = Endpoint.CHAT,
    principal: Principal | None = None,
    stream: bool = False,
    api_key: str | None = "sk-cg-secret",
    **fields: Any,
) -> RequestContext:
    """A context as the route hands it to the pipeline (headers case-insensitive, like Starlette's),
    with `fields` already filled in as the earlier stages would have: what was asked by its
    `Asked` names (`requested_model` for its model, else the body's), the outcome's and the meter's by their own."""
    body = {"model": "small", "messages": [{"role": "user", "content": "hi"}]} if body is None else body
    ctx = RequestContext(
        request_id="req_test",
        endpoint=endpoint,
        body=body,
        api_key=api_key,
        headers=Headers(headers or {}),
        principal=principal,
    )
    asked = {"model" if name == "requested_model" else name: fields.pop(name) for name in ASKED & fields.keys()}
    asked.setdefault("model", body.get("model", ""))
    ctx.asked = Asked(stream=stream, **asked)
    for name, value in fields.items():
        part = ctx.outcome if name in OUTCOME else ctx.meter if name in METER else ctx
        setattr(part, name, value)
    return ctx


ASKED = frozenset({"requested_model"} | {f.name for f in dataclasses.fields(Asked)} - {"model", "stream"})
OUTCOME = frozenset(f.name for f in dataclasses.fields(Outcome))
METER = frozenset(f.name for f in dataclasses.fields(Meter))


class ScriptedProvider:
    """An upstream faked at the provider interface: `complete` answers from a script, in order,
    and every call is kept. A script entry that is an exception is raised instead."""

    def __init__(self, name: str, script: list[Completion | BaseException] | None = None) -> None:
        self.name = name
        self.script = list(script or [])
        self.calls: list[UpstreamCall] = []

    async def complete(self, call: UpstreamCall) -> Completion:
        self.calls.append(call)
        answer = self.script.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    async def open_stream(self, call: UpstreamCall) -> UpstreamStream:
        raise NotImplementedError("no stage test streams from an upstream")

    async def aclose(self) -> None:
        return None


def chat_answer(text: str, usage: Usage | None = None, model: str = "upstream-model") -> Completion:
    body: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
    }
    if usage is not None:
        body["usage"] = {
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "total_tokens": usage.total_tokens,
        }
    return Completion(body, orjson.dumps(body), usage)


def deployment(
    name: str,
    *,
    upstream: str | None = None,
    input_per_mtok: str = "1",
    output_per_mtok: str = "2",
    provider: Provider | None = None,
    max_output_tokens: int = 4096,
    fallbacks: tuple[str, ...] = (),
) -> Deployment:
    """A configured model at a chosen price per million tokens, served by `provider`."""
    config = ModelConfig(
        name=name,
        model=upstream,
        api_base="http://upstream.invalid/v1",
        fallbacks=list(fallbacks),
        price={"input_per_mtok": input_per_mtok, "output_per_mtok": output_per_mtok},
    )
    price = Price.per_million(Decimal(input_per_mtok), Decimal(output_per_mtok))
    return Deployment(config, provider or ScriptedProvider(name), price, max_output_tokens)


def guarded(breakers: Breakers | None = None) -> Upstream:
    """The guarded upstream call (gateway/routing/guarded_call.py) on fresh breakers and metrics."""
    return Upstream(breakers or Breakers(BreakerConfig()), Metrics())
