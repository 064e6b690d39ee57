"""Upstream calls a routing policy makes on a request's behalf, with a body of its own
(a tier asked for logprobs, a judge's grading prompt, a summary). Each is charged to `ctx`,
like `gateway.upstream.call`, but leaves `ctx.served_model` alone: only the call whose answer
the client receives names the served model."""

from __future__ import annotations

from typing import Any

from gateway.bodies import answer_text
from gateway.context import Endpoint, RequestContext
from gateway.deployments import Deployment
from gateway.providers.base import Completion, UpstreamCall
from gateway.tokens import count_prompt, count_text
from gateway.upstream import charge
from policies.pricing import Usage


async def complete(ctx: RequestContext, dep: Deployment, body: dict[str, Any],
                   endpoint: Endpoint | None = None) -> Completion:
    endpoint = endpoint or ctx.endpoint
    body, _ = dep.fields.split(endpoint.value, body)  # only what the deployment takes (request_fields.py)
    completion = await dep.provider.complete(UpstreamCall(endpoint, body))
    usage = completion.usage
    if usage is None:  # count this call's own body, not the client's
        model = dep.config.upstream_model
        usage = Usage(count_prompt(body, model), count_text(answer_text(completion.body), model))
    charge(ctx, dep, usage)
    return completion
