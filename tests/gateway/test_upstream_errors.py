"""Faithful errors (issue 28 item 3): a provider's error reaches the client with its status,
message, `type`, `code` and `param`, in the shape of the API the client called; errors costgate
makes name no host, port or library; the litellm path maps to the same shapes, forwards
`retry-after`, and prints nothing on the console."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import httpx
import openai
import orjson
import pytest

from tests.gateway.in_process import (
    LocalUpstream,
    anthropic_client,
    chat_answer,
    new_key,
    openai_client,
    openai_model,
    running_app,
    settings_for,
)

HI = [{"role": "user", "content": "hi"}]
TOO_LONG = {
    "error": {
        "message": "This model's maximum context length is 8192 tokens. Your messages: 9001 tokens.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
}
NO_MODEL = {
    "error": {
        "message": "The model `gpt-9` does not exist or you do not have access to it.",
        "type": "invalid_request_error",
        "param": None,
        "code": "model_not_found",
    }
}
INTERNALS = ("127.0.0.1", "localhost", "aiohttp", "httpx", "litellm", "Connector", "ConnectError", "Errno")


def scripted(path: str, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    """The upstream's answer by the model asked for."""
    model = body.get("model")
    if model == "too-long":
        return 400, {}, orjson.dumps(TOO_LONG)
    if model == "gone":
        return 404, {}, orjson.dumps(NO_MODEL)
    if model == "busy":
        return 429, {"retry-after": "7"}, orjson.dumps({"error": {"message": "slow down", "type": "requests"}})
    return 200, {}, orjson.dumps(chat_answer())


@pytest.fixture(scope="module")
async def app(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Any]:
    def upstream(request: httpx.Request) -> httpx.Response:
        status, headers, raw = scripted(request.url.path, orjson.loads(request.content), {})
        return httpx.Response(status, headers=headers, content=raw)

    models = [openai_model("too-long"), openai_model("gone"), openai_model("busy")]
    async with running_app(
        settings_for(tmp_path_factory.mktemp("errors"), models), httpx.MockTransport(upstream)
    ) as app:
        yield app


async def test_context_length_exceeded_keeps_code_and_param(app: Any) -> None:
    with pytest.raises(openai.BadRequestError) as err:
        await openai_client(app, await new_key(app)).chat.completions.create(model="too-long", messages=HI)
    assert err.value.code == "context_length_exceeded"
    assert err.value.param == "messages"
    assert err.value.type == "invalid_request_error"
    assert err.value.body["message"] == TOO_LONG["error"]["message"]  # the provider's words, unprefixed


async def test_context_length_exceeded_in_anthropic_shape(app: Any) -> None:
    with pytest.raises(anthropic.BadRequestError) as err:
        await anthropic_client(app, await new_key(app)).messages.create(model="too-long", max_tokens=5, messages=HI)
    assert err.value.body["error"] == {"type": "invalid_request_error", "message": TOO_LONG["error"]["message"]}


async def test_a_provider_404_is_a_404_with_its_code(app: Any) -> None:
    with pytest.raises(openai.NotFoundError) as err:
        await openai_client(app, await new_key(app)).chat.completions.create(model="gone", messages=HI)
    assert err.value.code == "model_not_found"
    assert err.value.body["message"] == NO_MODEL["error"]["message"]


async def test_a_provider_429_forwards_retry_after(app: Any) -> None:
    with pytest.raises(openai.RateLimitError) as err:
        await openai_client(app, await new_key(app)).chat.completions.create(model="busy", messages=HI)
    assert err.value.response.headers["retry-after"] == "7"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("stream", [False, True])
async def test_an_unreachable_provider_names_no_host_or_library(tmp_path_factory, stream: bool) -> None:
    port = closed_port()
    models = [openai_model("away", f"http://127.0.0.1:{port}/v1")]
    async with running_app(settings_for(tmp_path_factory.mktemp("away"), models)) as app:  # aiohttp's own network
        with pytest.raises(openai.APIStatusError) as err:
            await openai_client(app, await new_key(app)).chat.completions.create(
                model="away", messages=HI, stream=stream
            )
    assert err.value.status_code == 502
    assert err.value.code == "upstream_unreachable"
    message = err.value.body["message"]
    assert "'away'" in message  # the model, which the client named
    for internal in (*INTERNALS, str(port)):
        assert internal not in message, message


@pytest.fixture(scope="module")
def local_upstream() -> AsyncIterator[LocalUpstream]:
    server = LocalUpstream(scripted)
    yield server
    server.stop()


@pytest.fixture(scope="module")
async def litellm_app(tmp_path_factory, local_upstream: LocalUpstream) -> AsyncIterator[Any]:
    models = [
        {
            "name": name,
            "provider": "litellm",
            "model": f"openai/{name}",
            "api_base": local_upstream.url,
            "api_key": "sk-upstream-secret",
            "price": {"input_per_mtok": "1", "output_per_mtok": "2"},
            "max_retries": 0,
        }
        for name in ("too-long", "gone", "busy", "fine")
    ]
    async with running_app(settings_for(tmp_path_factory.mktemp("litellm"), models)) as app:
        yield app


async def test_litellm_context_length_exceeded_keeps_code_and_param(litellm_app: Any, capfd) -> None:
    client = openai_client(litellm_app, await new_key(litellm_app))
    with pytest.raises(openai.BadRequestError) as err:
        await client.chat.completions.create(model="too-long", messages=HI)
    assert err.value.code == "context_length_exceeded"
    assert err.value.param == "messages"
    assert err.value.body["message"] == TOO_LONG["error"]["message"]
    printed = capfd.readouterr()
    assert "Give Feedback" not in printed.out + printed.err
    assert "LiteLLM" not in printed.out + printed.err


async def test_litellm_404_and_429_map_like_openais(litellm_app: Any, capfd) -> None:
    client = openai_client(litellm_app, await new_key(litellm_app))
    with pytest.raises(openai.NotFoundError) as gone:
        await client.chat.completions.create(model="gone", messages=HI)
    assert gone.value.body["message"] == NO_MODEL["error"]["message"]
    with pytest.raises(openai.RateLimitError) as busy:
        await client.chat.completions.create(model="busy", messages=HI)
    assert busy.value.response.headers["retry-after"] == "7"
    for err in (gone.value, busy.value):
        for internal in INTERNALS:
            assert internal.lower() not in err.body["message"].lower(), err.body["message"]
    printed = capfd.readouterr()
    assert "Give Feedback" not in printed.out + printed.err
    assert (await client.chat.completions.create(model="fine", messages=HI)).choices[0].message.content == "ok"


async def test_litellm_passes_the_trace_context_on(litellm_app: Any, local_upstream: LocalUpstream) -> None:
    traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    client = openai_client(litellm_app, await new_key(litellm_app))
    await client.chat.completions.create(model="fine", messages=HI, extra_headers={"traceparent": traceparent})
    _, _, headers = local_upstream.seen[-1]
    assert headers["traceparent"] == traceparent
