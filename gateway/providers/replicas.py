"""Several replicas of one model behind one Provider: least outstanding tokens, the batch lane's
admission control, and failover when a replica dies.

The bookkeeping lives in engine/admission.py (`LoadBook`); this module only drives it from the
request path: it weighs each call (prompt tokens + the most output tokens it may produce),
waits while a batch-class call may not start, sends the call to the chosen replica, and
releases the weight when the answer is complete (for a stream: when it closes).

Failover: a call that fails on one replica with a connection error, a reset before the first
byte, a 5xx or a 429 is sent to another replica it has not tried; a replica that could not be
reached (or reset the connection) is skipped for `cooldown_s`. A timeout is not retried (the
replica may still be working on it), nor is an error the client caused. A failed call is never
charged, so failover never charges twice.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from typing import TypeVar

import httpx
from prometheus_client.core import GaugeMetricFamily, Metric

from engine.admission import AdmissionPolicy, LoadBook, Priority, Ticket
from gateway.config.models_config import ModelConfig
from gateway.core.errors import Unavailable, UpstreamError, UpstreamTimeout
from gateway.providers.base import Completion, Provider, StreamEvent, UpstreamCall, UpstreamStream, call_weight
from gateway.providers.openai_compatible import OpenAIProvider

T = TypeVar("T")


def replica_is_down(err: UpstreamError) -> bool:
    """A failure that says the replica itself is gone, not that this one call went wrong."""
    return err.code in ("upstream_unreachable", "upstream_connection_failed")


class ReplicaSet:
    """`Provider` over several providers serving the same model."""

    def __init__(
        self,
        name: str,
        replicas: Sequence[Provider],
        policy: AdmissionPolicy,
        *,
        max_output_tokens: int,
        batch_max_wait_s: float = 60.0,
        forward_priority: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.replicas = list(replicas)
        self.book = LoadBook([r.name for r in self.replicas], policy)
        self.max_output_tokens = max_output_tokens
        self.batch_max_wait_s = batch_max_wait_s
        self.forward_priority = forward_priority
        self._clock = clock
        # Replaced on every release: waiters hold the old one, which is set to wake them all.
        self._released = asyncio.Event()

    async def complete(self, call: UpstreamCall) -> Completion:
        completion, ticket = await self._on_some_replica(call, lambda replica, c: replica.complete(c))
        self._release(ticket)
        return completion

    async def open_stream(self, call: UpstreamCall) -> UpstreamStream:
        stream, ticket = await self._on_some_replica(call, lambda replica, c: replica.open_stream(c))
        return ReleasingStream(stream, lambda: self._release(ticket))

    async def aclose(self) -> None:
        for replica in self.replicas:
            await replica.aclose()

    async def _on_some_replica(
        self, call: UpstreamCall, send: Callable[[Provider, UpstreamCall], Awaitable[T]]
    ) -> tuple[T, Ticket]:
        """`send` on the best replica, then on others while replicas fail; the caller releases
        the returned ticket once the answer is complete."""
        weight = call_weight(call, self.max_output_tokens)
        upstream_call = self._for_replica(call)
        tried: set[int] = set()
        last_error: UpstreamError | None = None
        while (ticket := await self._admit(call.priority, weight, frozenset(tried))) is not None:
            replica = ticket.replica
            try:
                result = await send(self.replicas[replica], upstream_call)
            except UpstreamTimeout:
                self._release(ticket)
                raise
            except UpstreamError as err:
                self._release(ticket)
                tried.add(replica)
                last_error = err
                if replica_is_down(err):
                    self.book.mark_down(replica, self._clock())
                continue
            except BaseException:
                self._release(ticket)
                raise
            self.book.mark_up(replica)
            return result, ticket
        if last_error is not None:
            raise last_error
        raise Unavailable(f"no replica of {self.name!r} could take the request")

    def _for_replica(self, call: UpstreamCall) -> UpstreamCall:
        if not self.forward_priority:
            return call
        return replace(call, body={**call.body, "priority": int(call.priority)})

    async def _admit(self, priority: Priority, weight: int, tried: frozenset[int]) -> Ticket | None:
        deadline = self._clock() + self.batch_max_wait_s
        while not self.book.may_admit(priority, weight, self._clock()):
            remaining = deadline - self._clock()
            if remaining <= 0:
                raise Unavailable(
                    f"the batch lane of {self.name!r} has had no idle capacity for {self.batch_max_wait_s:g} s",
                    code="batch_lane_busy",
                    retry_after=self.batch_max_wait_s,
                )
            try:
                await asyncio.wait_for(self._released.wait(), remaining)
            except TimeoutError:
                pass
        replica = self.book.choose(self._clock(), tried)
        return None if replica is None else self.book.admit(replica, priority, weight)

    def _release(self, ticket: Ticket) -> None:
        self.book.release(ticket)
        released, self._released = self._released, asyncio.Event()
        released.set()


class ReleasingStream:
    """A replica's stream that gives its admission weight back once, when it ends or closes."""

    def __init__(self, stream: UpstreamStream, release: Callable[[], None]) -> None:
        self._stream = stream
        self._release: Callable[[], None] | None = release

    def _done(self) -> None:
        if self._release is not None:
            release, self._release = self._release, None
            release()

    async def __aiter__(self) -> AsyncIterator[StreamEvent]:
        try:
            async for event in self._stream:
                yield event
        finally:
            self._done()

    async def aclose(self) -> None:
        try:
            await self._stream.aclose()
        finally:
            self._done()


def replica_set(
    config: ModelConfig, max_output_tokens: int, transport: httpx.AsyncBaseTransport | None = None
) -> ReplicaSet:
    """The config's `api_base` and `replicas`, each an OpenAI-compatible server (vLLM's, say).
    Each replica is tried once per call (no same-replica retries): failover replaces them."""
    urls = list(dict.fromkeys(([config.api_base] if config.api_base else []) + config.replicas))
    replicas = [
        OpenAIProvider(
            f"{config.name}@{i}",
            url,
            config.api_key,
            timeout_s=config.timeout_s,
            connect_timeout_s=config.connect_timeout_s,
            max_retries=0,
            transport=transport,
        )
        for i, url in enumerate(urls)
    ]
    a = config.admission
    policy = AdmissionPolicy(a.batch_idle_tokens, a.batch_max_tokens, a.cooldown_s)
    forward = a.forward_priority if a.forward_priority is not None else config.provider == "local"
    return ReplicaSet(
        config.name,
        replicas,
        policy,
        max_output_tokens=max_output_tokens,
        batch_max_wait_s=a.batch_max_wait_s,
        forward_priority=forward,
    )


class ReplicaCollector:
    """Prometheus view of every replica set: outstanding tokens per replica and class, and
    whether each replica is in service (not in its cooldown). Read at scrape time."""

    def __init__(
        self, providers: Callable[[], Iterable[Provider]], clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._providers = providers
        self._clock = clock

    def collect(self) -> Iterator[Metric]:
        tokens = GaugeMetricFamily(
            "costgate_replica_outstanding_tokens",
            "Prompt + max output tokens admitted and not yet answered",
            labels=["model", "replica", "priority"],
        )
        up = GaugeMetricFamily(
            "costgate_replica_up",
            "1 unless the replica is skipped after a failed connection",
            labels=["model", "replica"],
        )
        now = self._clock()
        for provider in self._providers():
            if not isinstance(provider, ReplicaSet):
                continue
            for load in provider.book.replicas:
                for priority, count in load.outstanding.items():
                    tokens.add_metric([provider.name, load.name, priority.label], count)
                up.add_metric([provider.name, load.name], 1.0 if load.live(now) else 0.0)
        yield tokens
        yield up
