"""Upstream calls a routing policy makes on a request's behalf, with a body of its own
(a tier asked for logprobs, a judge's grading prompt, a summary). Each is charged to `ctx`,
like `gateway.upstream.call`, but leaves `ctx.served_model` alone: only the call whose answer
the client receives names the served model."""

from __future__ import annotations

from typing import Any

from gateway.context import Endpoint, RequestContext
from gateway.deployments import Deployment
from gateway.providers.base import Completion, UpstreamCall
from gateway.upstream import charge
from gateway.tokens import count_prompt, count_text
from policies.pricing import Usage


async def complete(ctx: RequestContext, dep: Deployment, body: dict[str, Any],
                   endpoint: Endpoint | None = None) -> Completion:
    completion = await dep.provider.complete(UpstreamCall(endpoint or ctx.endpoint, body))
    usage = completion.usage
    if usage is None:  # count this call's own body, not the client's
        model = dep.config.upstream_model
        usage = Usage(count_prompt(body, model), count_text(message_text(completion.body), model))
    charge(ctx, dep, usage)
    return completion


def message_text(body: dict[str, Any]) -> str:
    """The first choice's text (chat `message.content` or completions `text`)."""
    choices = body.get("choices") or [{}]
    choice = choices[0] if isinstance(choices[0], dict) else {}
    message = choice.get("message")
    text = message.get("content") if isinstance(message, dict) else choice.get("text")
    return text if isinstance(text, str) else ""

