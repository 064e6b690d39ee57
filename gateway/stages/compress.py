"""Stage: context compression (policies/compression.py), the last stage before route.

Runs for chat requests when `compression.enabled` and the requested model is covered. The
budget stage has already reserved against the uncompressed prompt, so the reservation holds
the (smaller) compressed call plus the summary call. Tokens saved go to the
`costgate_compression_tokens_saved` metric and the `x-costgate-compressed-tokens` header.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from starlette.responses import Response

from gateway.config.settings import CompressionConfig
from gateway.core.bodies import answer_text
from gateway.core.context import Endpoint, RequestContext
from gateway.core.errors import UpstreamError
from gateway.core.tokens import count_messages, count_text
from gateway.routing.cascade_metrics import PolicyMetrics
from gateway.routing.guarded_call import Upstream
from gateway.upstream.deployments import Deployment
from policies import compression as compress

log = logging.getLogger("costgate.compress")


class Compress:
    def __init__(
        self,
        config: CompressionConfig,
        deployments: Mapping[str, Deployment],
        metrics: PolicyMetrics,
        upstream: Upstream,
    ) -> None:
        if config.summarizer is not None and config.summarizer not in deployments:
            raise ValueError(f"compression: unknown summarizer model {config.summarizer!r}")
        self.config = config
        self.summarizer = deployments[config.summarizer] if config.summarizer else None
        self.metrics = metrics
        self.upstream = upstream  # the summary call, guarded like any (breaker, priority)

    def applies(self, ctx: RequestContext) -> bool:
        models = self.config.models
        return (
            self.config.enabled
            and ctx.endpoint is Endpoint.CHAT
            and isinstance(ctx.body.get("messages"), list)
            and (models is None or ctx.asked.model in models)
        )

    async def __call__(self, ctx: RequestContext) -> Response | None:
        if not self.applies(ctx):
            return None
        messages = ctx.body["messages"]
        count = self._count
        p = compress.split(messages, self.config.budget_tokens, self.config.keep_recent, count)
        if p is None:
            return None
        summary = await self._summary(ctx, p.older)
        shorter = compress.compressed(p, summary)
        saved = count(messages) - count(shorter)
        if saved <= 0:
            return None
        ctx.sent_messages = shorter  # the client's body stays as asked (the caches, the ledger read it)
        ctx.compressed_tokens = saved
        self.metrics.compressions.labels(ctx.asked.model).inc()
        self.metrics.compression_tokens_saved.labels(ctx.asked.model).inc(saved)
        return None

    @staticmethod
    def _count(messages: Sequence[dict]) -> int:
        return count_messages(list(messages))

    async def _summary(self, ctx: RequestContext, older: list[dict]) -> str:
        limit = self.config.summary_max_tokens
        if self.summarizer is not None:
            body = {
                "model": self.summarizer.config.upstream_model,
                "max_tokens": limit,
                "temperature": 0,
                "messages": compress.summary_request(older, limit),
            }
            try:
                text = answer_text((await self.upstream.complete(ctx, self.summarizer, body, Endpoint.CHAT)).body)
                if text.strip():
                    return text.strip()
            except UpstreamError as err:  # a summary is an optimization: prune instead
                log.warning("compression summarizer failed (%s); pruning extractively", err.message)
        return compress.extractive_summary(older, limit, count_text)
