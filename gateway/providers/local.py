"""`provider: local` — a model served by the bundled engine (vLLM), launched and watched by
engine/launcher.py, spoken to like any OpenAI-compatible upstream.

Each call makes sure the engine runs (starting it lazily: the first call after an idle
shutdown waits for the start), counts its tokens as outstanding on the replica while it runs
(`outstanding_tokens`, what a replica set balances on), and adds a carbon estimate to the
answer's `usage` (`carbon_g_co2e`, from the measured throughput; engine/cost.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson

from engine.config import EngineSettings
from engine.cost import LivePrice
from engine.launcher import EngineUnavailable, LaunchSpec, Replica
from gateway.errors import Unavailable
from gateway.providers.base import Completion, StreamEvent, UpstreamCall, usage_from
from gateway.providers.openai import OpenAIProvider
from gateway.settings import ModelConfig
from gateway.tokens import count_prompt
from policies.pricing import Usage

DEFAULT_OUTPUT_WEIGHT = 256  # outstanding-token weight of a call that names no max_tokens


def call_tokens(call: UpstreamCall) -> int:
    """What a call may occupy on the engine: its prompt plus the output it may produce, times n."""
    body = call.body
    asked = body.get("max_completion_tokens") or body.get("max_tokens")
    output = asked if isinstance(asked, int) and asked > 0 else DEFAULT_OUTPUT_WEIGHT
    n = body.get("n")
    return count_prompt(body, str(body.get("model", ""))) + output * (n if isinstance(n, int) and n > 0 else 1)


def with_priority(call: UpstreamCall) -> UpstreamCall:
    """The request's class as vLLM's `priority` field (scheduled by it where the launcher asks for
    `--scheduling-policy priority`: on GPU)."""
    return replace(call, body={**call.body, "priority": int(call.priority)})


class CountedStream:
    """A stream that releases its tokens from the replica once, when it ends or is abandoned."""

    def __init__(self, provider: LocalProvider, stream: Any, tokens: int) -> None:
        self._provider, self._stream, self._tokens = provider, stream, tokens
        self._done = False

    async def __aiter__(self) -> AsyncIterator[StreamEvent]:
        try:
            async for event in self._stream:
                usage = usage_from(event.data.get("usage"))
                if usage is not None:
                    self._provider.account(usage)
                yield event
        finally:
            self._release()

    def _release(self) -> None:
        if not self._done:
            self._done = True
            self._provider.replica.end(self._tokens)

    async def aclose(self) -> None:
        try:
            await self._stream.aclose()
        finally:
            self._release()


class LocalProvider:
    def __init__(self, config: ModelConfig, replica: Replica) -> None:
        self.name = config.name
        self.config = config
        self.replica = replica
        self.price = LivePrice(replica.meter)
        self.carbon_g_total = 0.0
        self._upstream: OpenAIProvider | None = None
        self._upstream_url: str | None = None

    @property
    def outstanding_tokens(self) -> int:
        return self.replica.outstanding_tokens

    async def _ready_upstream(self) -> OpenAIProvider:
        try:
            url = await self.replica.ensure_ready()
        except EngineUnavailable as err:
            raise Unavailable(str(err), code="engine_unavailable", retry_after=30) from None
        if self._upstream is None or self._upstream_url != url:  # a restart moves the engine to a new port
            if self._upstream is not None:
                await self._upstream.aclose()
            c = self.config
            self._upstream = OpenAIProvider(c.name, url + "/v1", None, timeout_s=c.timeout_s,
                                            connect_timeout_s=c.connect_timeout_s, max_retries=c.max_retries)
            self._upstream_url = url
        return self._upstream

    def account(self, usage: Usage) -> float:
        grams = self.replica.meter.carbon(usage)
        self.carbon_g_total += grams
        return grams

    async def complete(self, call: UpstreamCall) -> Completion:
        call = with_priority(call)
        upstream = await self._ready_upstream()
        tokens = call_tokens(call)
        self.replica.begin(tokens)
        try:
            completion = await upstream.complete(call)
        finally:
            self.replica.end(tokens)
        if completion.usage is None or not isinstance(completion.body.get("usage"), dict):
            return completion
        body = dict(completion.body)
        body["usage"] = {**body["usage"], "carbon_g_co2e": round(self.account(completion.usage), 9)}
        return Completion(body, orjson.dumps(body), completion.usage)

    async def open_stream(self, call: UpstreamCall) -> CountedStream:
        call = with_priority(call)
        upstream = await self._ready_upstream()
        tokens = call_tokens(call)
        self.replica.begin(tokens)
        try:
            stream = await upstream.open_stream(call)
        except BaseException:
            self.replica.end(tokens)
            raise
        return CountedStream(self, stream, tokens)

    async def aclose(self) -> None:
        if self._upstream is not None:
            await self._upstream.aclose()
        await self.replica.stop()


def local_provider(config: ModelConfig, data_dir: str = "./costgate-data") -> LocalProvider:
    """The provider of a `provider: local` model with no `api_base`: costgate runs its engine."""
    from engine.default_model import resolve_model

    raw = dict(config.engine)
    data = Path(str(raw.pop("data_dir", data_dir)))
    settings = EngineSettings.parse(raw)
    path, prepare = resolve_model(config.upstream_model, data)
    log_dir = Path(settings.log_dir) if settings.log_dir else data / "engine"
    replica = Replica(LaunchSpec(config.upstream_model, str(path), settings), log_dir, prepare=prepare)
    return LocalProvider(config, replica)
