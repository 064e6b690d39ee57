"""The most one request can cost: the worst case a budget holds before any upstream call, and
the meter that cuts a relayed stream at that hold.

One function, `worst_case(ctx, dep)`, prices one call to one deployment; every route target
builds on it (a direct model and its fallbacks, cascade tiers and their judge, the cost
router), and batch lines go through the same targets. It counts what providers bill
(docs/reliability.md, "How the worst case is computed"):

- prompt tokens: the whole body as text (every message, every prompt of a list, tools,
  functions, response_format schemas, whatever else is sent), images by OpenAI's tile rule;
- completions: every prompt of a list x `n` x `best_of`;
- each completion: the client's max_tokens, else the model's own cap, plus predicted-output
  tokens (billed as completion tokens when rejected), plus `count_slack` for the stream meter.

A provider that ignores max_tokens can still bill more. A stream is therefore metered: the
relay counts the output it forwards and, once the request's cost reaches its hold, ends the
stream itself (`StreamMeter`). A whole answer arrives at once and cannot be cut: its true
cost is charged, and the budget refuses what comes after.
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from gateway.core.bodies import Field
from gateway.core.context import Endpoint, RequestContext
from gateway.core.tokens import billed_prompt_tokens, count_delta, predicted_tokens
from gateway.upstream.deployments import Deployment
from gateway.upstream.server_tools import fee_bound
from policies.pricing import FAST, PICO_USD, SERVICE_TIERS, Price, Tier, Usage, format_usd, worst_case_cost


def count_slack(cap: int) -> int:
    """Output tokens reserved beyond a completion's cap, so that an answer which stops at its cap
    is never cut: the stream meter counts each delta with tiktoken, which can read a little more
    than the provider generated (a word split across two deltas counts twice)."""
    return max(4, cap // 32)


def output_cap(ctx: RequestContext, dep: Deployment) -> int:
    """The most tokens one completion may produce: the client's limit, else the model's."""
    if ctx.endpoint is Endpoint.EMBEDDINGS:
        return 0
    asked = ctx.view.max_output_tokens
    return dep.max_output_tokens if asked is None else min(asked, dep.max_output_tokens)


def prompt_bound(ctx: RequestContext, dep: Deployment) -> int:
    """`billed_prompt_tokens` of the body `dep` is sent, streamed (the larger: it asks for usage),
    counted once per deployment per request (a cascade prices a tier, and its shadow, twice)."""
    bound = ctx.prompt_bounds.get(dep.name)
    if bound is None:
        model = dep.config.upstream_model
        sent, _ = dep.fields.upstream(ctx.endpoint.value, ctx.body, model, stream=True)
        bound = ctx.prompt_bounds[dep.name] = billed_prompt_tokens(sent, model, runs_tiktoken(dep))
    return bound


def runs_tiktoken(dep: Deployment) -> bool | None:
    """Whether `dep`'s provider counts tokens as tiktoken does, as its config says (unset: None,
    judged from the model's name by `billed_prompt_tokens`)."""
    return dep.config.tokenizer == "tiktoken" if dep.config.tokenizer else None


def unreported_prompt(ctx: RequestContext, dep: Deployment) -> int:
    """The prompt tokens charged for a call whose upstream reported no usage (a whole answer or a
    stream without it, a stream cut at its hold): what the hold counted, the most the provider
    can bill (its UTF-8 bytes where its tokenizer is not tiktoken), never a tiktoken estimate
    below that: the meter errs on the closed side."""
    return prompt_bound(ctx, dep)


def worst_case(ctx: RequestContext, dep: Deployment, per_completion: int | None = None) -> Decimal:
    """The most one call to `dep` can cost for this request. `per_completion` replaces the
    output cap (the cost router estimates with its expected output)."""
    prompt = prompt_bound(ctx, dep)
    price = held_price(ctx, dep)
    if ctx.endpoint is Endpoint.EMBEDDINGS:
        return worst_case_cost(prompt, 0, price)
    cap = output_cap(ctx, dep) if per_completion is None else per_completion
    each = cap + count_slack(cap) + predicted_tokens(ctx.body, dep.config.upstream_model)
    return worst_case_cost(prompt, ctx.view.completions * each, price) + tool_fees_bound(ctx, dep)


def tool_fees_bound(ctx: RequestContext, dep: Deployment) -> Decimal:
    """The most the provider-run tools a native call to `dep` keeps can cost (server_tools.py)."""
    native = ctx.native
    if native is None or not dep.server_tools or native.api.value not in dep.config.native_apis:
        return Decimal(0)
    return fee_bound(native.api.value, native.body, dep.server_tools)


def held_price(ctx: RequestContext, dep: Deployment) -> Price:
    """A Batch API line that its provider's Batch API answers is billed at the batch price
    (gateway/upstream/calls.py call_in_batch), so that is what it holds; a request that asks for
    the priority (`fast`) or ultrafast tier, where the model's config forwards `service_tier`, its price;
    anything else, list price. (An OpenAI project whose default tier is priority is charged at it,
    as its answers say, but held at list price: nothing in the request tells.) Each times the
    premium it is held at (`held_premium`)."""
    premium = held_premium(ctx, dep)
    if ctx.batch_line is not None and dep.batcher is not None and dep.price.batch is not None:
        price = dep.price.batch
    else:
        asked = asked_tier(ctx, dep)
        price = (dep.price.at(asked) or dep.price) if asked is not None else dep.price
    return price if premium == 1 else price.scaled(premium)


def held_premium(ctx: RequestContext, dep: Deployment) -> Decimal:
    """The premium a call is held at (`Price.premium`): the region the request pins
    (`inference_geo`, where its model's config forwards it), else the dearest the model is sold
    in, since Anthropic serves a workspace's `default_inference_geo` and nothing in the request
    tells which; times fast mode's where the request asks for it (`speed: fast`, forwarded)."""
    price = dep.price
    if not price.premiums:
        return Decimal(1)
    body = asked_body(ctx)
    pinned = body.get("inference_geo") if "inference_geo" in dep.fields.extra else None
    region = price.premium(geo=pinned) if isinstance(pinned, str) else price.dearest_region()
    fast = "speed" in dep.fields.extra and body.get("speed") == FAST
    return region * (price.premium(speed=FAST) if fast else Decimal(1))


def asked_body(ctx: RequestContext) -> dict[str, Any]:
    """The body as the client sent it, in its own API (a native call's), where the fields it
    asks for a tier, a region or a speed with are."""
    return ctx.native.body if ctx.native is not None else ctx.body


def asked_tier(ctx: RequestContext, dep: Deployment) -> Tier | None:
    """The dearer tier a request asks for by `service_tier`, where its model's config forwards it
    (flex, cheaper, is held at list price: it may be served at list)."""
    if "service_tier" not in dep.fields.extra:
        return None
    body = asked_body(ctx)
    named = body.get("service_tier")
    asked = SERVICE_TIERS.get(named) if isinstance(named, str) else None
    return asked if asked in (Tier.PRIORITY, Tier.ULTRAFAST) else None


class StreamMeter:
    """Counts a relayed stream's output tokens; `over` once they reach what the hold allows.

    Allowed output: what the hold leaves after the calls already charged (cascade tiers) and
    this call's prompt at its bound. The stream ends at the event that reaches it, so a request
    is charged at most its hold plus the rest of that one event (a token, for OpenAI-style
    streams).
    """

    def __init__(self, allowed_tokens: int, prompt_tokens: int = 0) -> None:
        self.allowed = allowed_tokens
        self.prompt = prompt_tokens  # the call's prompt at its bound (`unreported_prompt`)
        self.tokens = 0
        self.open_choices: dict[int, None] = {}  # indices that started and have not finished

    @classmethod
    def for_call(cls, ctx: RequestContext, dep: Deployment) -> StreamMeter | None:
        """A meter when a budget holds this request and its output costs money; else None."""
        hold = ctx.decided.hold
        if hold is None or not hold.budgets or not dep.price.output:
            return None
        prompt = unreported_prompt(ctx, dep)
        price = held_price(ctx, dep).for_prompt(prompt)  # the tier it is held at, a long prompt's rates
        left = hold.want_pusd * PICO_USD - ctx.meter.cost - prompt * price.input - tool_fees_bound(ctx, dep)
        return cls(int(left / price.output), prompt)

    def feed(self, data: dict[str, Any], generated: Iterable[tuple[Field, str]], model: str) -> None:
        """One chunk event: which choices are open, and the tokens of what it `generated`
        (core/bodies.py choice_fields of its choices)."""
        for choice in data.get("choices") or ():
            if not isinstance(choice, dict):
                continue
            index = choice.get("index", 0)
            if choice.get("finish_reason"):
                self.open_choices.pop(index, None)
            else:
                self.open_choices.setdefault(index)
        self.tokens += sum(count_delta(text, model) for _, text in generated)

    @property
    def over(self) -> bool:
        return self.tokens >= self.allowed

    def usage(self) -> Usage:
        """What a stream cut here is charged: its upstream reports nothing, so its prompt at the
        bound and the output counted."""
        return Usage(self.prompt, self.tokens)

    def closing_chunks(self, endpoint: Endpoint, last: dict[str, Any]) -> list[dict[str, Any]]:
        """A `finish_reason: length` chunk for every choice still open (the SDKs' ending)."""
        base: dict[str, Any] = {k: last[k] for k in ("id", "object", "created", "model") if k in last}
        ending: dict[str, Any] = {"delta": {}} if endpoint is Endpoint.CHAT else {"text": "", "logprobs": None}
        return [
            {**base, "choices": [{"index": i, **ending, "finish_reason": "length"}]}
            for i in (self.open_choices or {0: None})
        ]


def cut_reason(ctx: RequestContext) -> str:
    """Why a stream ended before its upstream did (a chat stream's closing comment, a native
    API's error event)."""
    hold = format_usd(ctx.decided.hold.want_pusd * PICO_USD) if ctx.decided.hold else "0"
    return f"stream cut at the budget hold of ${hold}: the upstream went on past the request's limit"
