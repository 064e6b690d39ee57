"""Stage: keep an opted-in team's cascade request and the last tier's answer for distillation
(issue 13, item 6; gateway/storage/distill_texts.py).

In the main pipeline it keeps escalations (the cascade's last tier answered the client); in
the side pipeline, shadow samples (the last tier answered after a cheaper tier's answer was
accepted). Only chat requests that succeeded, answered by the upstream (not a cache), with one
choice whose answer is whole text (not cut at `max_tokens`, no tool calls). Built only when a
team opts in and a cascade exists: otherwise no request passes through it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from starlette.responses import Response

from gateway.core.bodies import first_choice
from gateway.core.context import CacheStatus, Endpoint, RequestContext
from gateway.storage.distill_texts import KeptText, TextStore


class KeepText:
    def __init__(
        self, store: TextStore, last_tiers: Mapping[str, str], teams: Collection[str], source: str = "escalation"
    ) -> None:
        self.store = store
        self.last_tiers = last_tiers  # cascade name -> its last tier's model name
        self.teams = teams  # team names or ids that opted in
        self.source = source  # what its rows keep: "escalation" (the main pipeline) or "shadow"

    def for_shadows(self) -> KeepText:
        """The same stage for the side pipeline: what reaches it there are shadow samples."""
        return KeepText(self.store, self.last_tiers, self.teams, "shadow")

    async def __call__(self, ctx: RequestContext) -> Response | None:
        return None

    async def settle(self, ctx: RequestContext) -> None:
        p = ctx.principal
        last = self.last_tiers.get(ctx.asked.model)
        if p is None or last is None or (p.team_name not in self.teams and p.team_id not in self.teams):
            return
        if ctx.outcome.served_model != last or ctx.outcome.error is not None or ctx.outcome.status_code >= 400:
            return
        if ctx.endpoint is not Endpoint.CHAT or ctx.outcome.cache_status is not CacheStatus.MISS:
            return
        if ctx.body.get("n") not in (None, 1):
            return
        answer = kept_answer(ctx)
        if answer is None:
            return
        self.store.keep(
            KeptText(
                ctx.asked.model,
                self.source,
                ctx.request_id,
                p.team_id,
                p.team_name,
                last,
                ctx.body.get("messages"),
                answer,
            )
        )


def kept_answer(ctx: RequestContext) -> str | None:
    """The answer's whole text, or None when it is not one to learn from."""
    if ctx.outcome.response_body is not None:
        choice = first_choice(ctx.outcome.response_body)
        message = choice.get("message")
        if not isinstance(message, dict) or message.get("tool_calls") or choice.get("finish_reason") == "length":
            return None
        content = message.get("content")
        return content if isinstance(content, str) and content.strip() else None
    if ctx.asked.stream:
        text = "".join(ctx.completion_text)
        return text if text.strip() else None
    return None
