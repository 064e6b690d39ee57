"""The worst case a budget holds (gateway/upstream/worst_case.py, tokens.py, images.py): image tokens by
OpenAI's tile rule, image sizes from data: URLs, every billed prompt and completion counted,
and the stream meter that ends a stream at its hold."""

from __future__ import annotations

import base64
import io
from dataclasses import replace
from decimal import Decimal

import orjson
import pytest
from PIL import Image

from gateway.config.models_config import ModelConfig
from gateway.core.asked import Asked
from gateway.core.bodies import choice_fields
from gateway.core.context import Endpoint, RequestContext
from gateway.core.images import GPT_4O, data_url_size, rule_for, tile_count
from gateway.core.request_fields import FieldPolicy
from gateway.core.request_view import completion_count
from gateway.core.tokens import billed_prompt_tokens, count_prompt
from gateway.providers.openai_compatible import OpenAIProvider
from gateway.upstream.deployments import Deployment
from gateway.upstream.worst_case import StreamMeter, count_slack, worst_case
from policies.budgets import Budget, Hold, Period, Scope
from policies.pricing import Price
from tests.fakes.fake_billing import body_tokens


@pytest.mark.parametrize(
    ("size", "detail", "tokens"),
    [
        ((1024, 1024), "high", 765),  # OpenAI's examples: 768 x 768, 4 tiles
        ((2048, 4096), "high", 1105),  # 1024 x 2048, then 768 x 1536: 6 tiles
        ((4096, 8192), "low", 85),
        ((512, 512), "auto", 255),
        ((100, 100), None, 255),  # never scaled up
        ((768, 2048), "high", 1445),
        (None, "high", 1445),  # size unknown: the most tiles the rule allows
        (None, "low", 85),
    ],
)
def test_openai_tile_rule(size: tuple[int, int] | None, detail: str | None, tokens: int) -> None:
    assert GPT_4O.tokens(size, detail) == tokens


def test_no_size_beats_the_unknown_worst_case() -> None:
    sizes = [(w, h) for w in range(64, 8200, 97) for h in range(64, 8200, 389)]
    assert max(tile_count(w, h) for w, h in sizes) == 8


def test_model_rules() -> None:
    assert rule_for("gpt-4o") is GPT_4O and rule_for("openai/gpt-4o-2024-08-06") is GPT_4O
    assert rule_for("gpt-4o-mini").tokens((1024, 1024), "high") == 2833 + 4 * 5667
    assert rule_for("anthropic/claude-haiku-4-5").tokens((64, 64), "low") == 1600


def data_url(fmt: str, size: tuple[int, int], **save: object) -> str:
    buffer = io.BytesIO()
    Image.new("RGB", size, (200, 30, 30)).save(buffer, fmt, **save)
    mime = {"JPEG": "jpeg", "PNG": "png", "GIF": "gif", "WEBP": "webp"}[fmt]
    return f"data:image/{mime};base64," + base64.b64encode(buffer.getvalue()).decode()


@pytest.mark.parametrize(
    ("fmt", "save"),
    [
        ("PNG", {}),
        ("GIF", {}),
        ("JPEG", {}),
        ("WEBP", {}),
        ("WEBP", {"lossless": True}),
        ("JPEG", {"comment": b"c" * 60_000}),
    ],
)  # size marker past 32 KiB
@pytest.mark.parametrize("size", [(1, 1), (640, 480), (3000, 1000)])
def test_sizes_from_data_urls(fmt: str, save: dict, size: tuple[int, int]) -> None:
    assert data_url_size(data_url(fmt, size, **save)) == size


@pytest.mark.parametrize(
    "url",
    [
        "https://example.com/cat.png",
        "data:image/png;base64,!!!!",
        "data:image/png;base64," + base64.b64encode(b"not an image").decode(),
        "",
    ],
)
def test_unknown_sizes(url: str) -> None:
    assert data_url_size(url) is None


@pytest.mark.parametrize(
    ("body", "count"),
    [
        ({"messages": []}, 1),
        ({"messages": [], "n": 3}, 3),
        ({"prompt": "one"}, 1),
        ({"prompt": ["a"] * 100}, 100),
        ({"prompt": [1, 2, 3]}, 1),  # one prompt of tokens
        ({"prompt": [[1, 2], [3]], "n": 2}, 4),
        ({"prompt": "x", "best_of": 20}, 20),
        ({"prompt": ["a", "b"], "n": 2, "best_of": 5}, 20),
        ({"prompt": "x", "n": 0, "best_of": "9"}, 1),
    ],
)
def test_completion_count(body: dict, count: int) -> None:
    assert completion_count(body) == count


PNG = data_url("PNG", (1024, 1024))
ATTACKS = {
    "plain": {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
    "prompt list": {"model": "m", "prompt": [" ".join(["word"] * 50)] * 100},
    "token arrays": {"model": "m", "prompt": [[1234] * 500] * 20},
    "tools": {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [
            {
                "type": "function",
                "function": {"name": f"f{i}", "description": "lorem ipsum " * 200, "parameters": {"type": "object"}},
            }
            for i in range(50)
        ],
    },
    "schema": {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "response_format": {
            "type": "json_schema",
            "json_schema": {
                "name": "s",
                "schema": {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(2000)}},
            },
        },
    },
    "images": {
        "model": "m",
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "what is this"},
                    {"type": "image_url", "image_url": {"url": PNG}},
                    *[{"type": "image_url", "image_url": {"url": f"https://example.com/{i}.png"}} for i in range(10)],
                ],
            }
        ],
    },
}


@pytest.mark.parametrize("name", list(ATTACKS))
def test_the_bound_covers_a_provider_billing_the_whole_body(name: str) -> None:
    """What the fake upstream of the budget tests bills for a body is never above the bound, and
    the bound is never below OpenAI's own count of the prompt."""
    body = ATTACKS[name]
    billed = body_tokens(orjson.dumps(body), orjson.loads(orjson.dumps(body)), "gpt-4o")
    bound = billed_prompt_tokens(body, "gpt-4o")
    assert billed <= bound <= billed + 3
    assert bound >= count_prompt(body, "gpt-4o")


def test_images_count_by_tiles_not_bytes() -> None:
    one = billed_prompt_tokens(ATTACKS["images"], "gpt-4o")
    assert 765 + 10 * 1445 < one < 765 + 10 * 1445 + 400  # not the PNG's base64 as text


def deployment(max_output: int = 1000, model: str = "gpt-4o") -> Deployment:
    config = ModelConfig(
        name="d",
        model=model,
        api_base="http://127.0.0.1:9/v1",
        price={"input_per_mtok": "2.5", "output_per_mtok": "10"},
    )
    return Deployment(
        config,
        OpenAIProvider("d", "http://127.0.0.1:9/v1", None),
        Price.per_million(Decimal("2.5"), Decimal("10")),
        max_output,
    )


def context(body: dict, endpoint: Endpoint = Endpoint.CHAT) -> RequestContext:
    return RequestContext(
        request_id="r",
        endpoint=endpoint,
        body=body,
        api_key=None,
        headers={},
        asked=Asked(body.get("model", ""), stream=bool(body.get("stream"))),
    )


@pytest.mark.parametrize(
    ("body", "endpoint", "completions", "each"),
    [
        ({"messages": [{"role": "user", "content": "hi"}]}, Endpoint.CHAT, 1, 1000),
        ({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 50, "n": 3}, Endpoint.CHAT, 3, 50),
        ({"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 5000}, Endpoint.CHAT, 1, 1000),
        ({"prompt": ["a"] * 100, "max_tokens": 100}, Endpoint.COMPLETIONS, 100, 100),
        ({"prompt": "a", "max_tokens": 200, "best_of": 20}, Endpoint.COMPLETIONS, 20, 200),
        ({"input": ["a"] * 100}, Endpoint.EMBEDDINGS, 0, 0),
    ],
)
def test_worst_case_prices_every_completion(body: dict, endpoint: Endpoint, completions: int, each: int) -> None:
    dep, ctx = deployment(), context({"model": "d", **body}, endpoint)
    prompt = billed_prompt_tokens(dep.fields.upstream(endpoint.value, ctx.body, "gpt-4o", True)[0], "gpt-4o")
    output = completions * (each + count_slack(each)) if completions else 0
    assert worst_case(ctx, dep) == prompt * dep.price.input + output * dep.price.output


def test_predicted_output_is_reserved_as_output() -> None:
    dep = deployment()
    plain = {"model": "d", "messages": [{"role": "user", "content": "x"}], "max_tokens": 10}
    predicted = {**plain, "prediction": {"type": "content", "content": "word " * 300}}
    assert worst_case(context(predicted), dep) - worst_case(context(plain), dep) > 300 * dep.price.output


def test_a_plain_request_is_not_reserved_absurdly() -> None:
    """Against what OpenAI would bill for it at most (its prompt count, max_tokens of output)."""
    dep = deployment()
    body = {
        "model": "d",
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Summarize the plot of Hamlet in two lines."},
        ],
        "max_tokens": 100,
    }
    most_billed = count_prompt(body, "gpt-4o") * dep.price.input + 100 * dep.price.output
    assert worst_case(context(body), dep) / most_billed < Decimal("1.3")


def chunk(text: str | None, index: int = 0, finish: str | None = None) -> dict:
    delta = {} if text is None else {"content": text}
    return {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": index, "delta": delta, "finish_reason": finish}],
    }


def feed(meter: StreamMeter, event: dict) -> None:
    """As the relay feeds it: the event and what its choices generated."""
    meter.feed(event, choice_fields(event["choices"]), "gpt-4o")


def test_the_meter_ends_a_stream_at_its_hold() -> None:
    meter = StreamMeter(10)
    for _ in range(4):
        feed(meter, chunk(" x x"))  # 2 tokens each
    assert meter.tokens == 8 and not meter.over
    feed(meter, chunk(" x", 1))
    assert not meter.over
    feed(meter, chunk(" x", 1))
    assert meter.over  # 10 of 10
    assert meter.closing_chunks(Endpoint.CHAT, chunk(None)) == [chunk(None, i, "length") for i in (0, 1)]


def test_the_meter_counts_tool_calls_and_reasoning_too() -> None:
    meter = StreamMeter(100)
    event = chunk(None)
    event["choices"][0]["delta"] = {
        "role": "assistant",
        "reasoning_content": " x x",
        "tool_calls": [{"index": 0, "function": {"arguments": " x x x"}}],
    }
    feed(meter, event)
    assert meter.tokens == 5


def test_a_meter_only_where_a_budget_holds_the_request() -> None:
    dep = deployment()
    ctx = context({"model": "d", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 10})
    assert StreamMeter.for_call(ctx, dep) is None
    want = worst_case(ctx, dep)
    ctx.decided.hold = Hold("h", 0.0, (), 1)
    assert StreamMeter.for_call(ctx, dep) is None  # rate limits only: no money held
    budget = Budget(Scope.TEAM, "t", Period.TOTAL, 10**12, ())
    ctx.decided.hold = Hold("h", 0.0, (budget,), int(want * 10**12))
    meter = StreamMeter.for_call(ctx, dep)
    assert meter is not None and meter.allowed == 10 + count_slack(10)


def test_a_stream_asked_at_priority_is_metered_at_the_priority_rates_it_is_held_at() -> None:
    """Held at priority (2x), the meter must count output at those rates too: at list price it
    would let the stream run to twice what the hold covers."""
    listed = Price.per_million(Decimal("2.5"), Decimal("10"))
    dep = replace(
        deployment(),
        price=replace(listed, priority=listed.scaled(Decimal(2))),
        fields=FieldPolicy(extra=frozenset({"service_tier"})),
    )
    ctx = context(
        {"model": "d", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 10, "service_tier": "priority"}
    )
    want = worst_case(ctx, dep)
    assert want == 2 * worst_case(context({**ctx.body, "service_tier": "default"}), dep)
    budget = Budget(Scope.TEAM, "t", Period.TOTAL, 10**12, ())
    ctx.decided.hold = Hold("h", 0.0, (budget,), int(want * 10**12))
    meter = StreamMeter.for_call(ctx, dep)
    assert meter is not None and meter.allowed == 10 + count_slack(10)
