"""Request ids (issue 28 item 1): every answer and error carries its id in the header its API's
SDK reads (`x-request-id`, Anthropic's `request-id`), echoes `x-client-request-id`, and the id is
the ledger row's. Through the official SDKs, whose `_request_id` / `request_id` must be set."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anthropic
import httpx
import openai
import pytest

from tests.gateway.in_process import (
    anthropic_client,
    chat_answer,
    http_client,
    ledger_rows,
    new_key,
    openai_client,
    openai_model,
    running_app,
    settings_for,
)

HI = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
async def app(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Any]:
    def upstream(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=chat_answer())

    settings = settings_for(tmp_path_factory.mktemp("ids"), [openai_model("m")])
    async with running_app(settings, httpx.MockTransport(upstream)) as app:
        yield app


async def test_openai_sdk_gets_the_id_of_its_ledger_row(app: Any) -> None:
    client = openai_client(app, await new_key(app))
    raw = await client.chat.completions.with_raw_response.create(model="m", messages=HI)
    completion = raw.parse()
    assert completion._request_id is not None and completion._request_id.startswith("req_")
    assert completion._request_id == raw.headers["x-costgate-request-id"]
    assert "request-id" not in raw.headers  # OpenAI's API: its own header only
    [row] = [r for r in await ledger_rows(app) if r["request_id"] == completion._request_id]
    assert row["status"] == 200


async def test_each_request_has_its_own_id(app: Any) -> None:
    client = openai_client(app, await new_key(app))
    ids = {(await client.chat.completions.create(model="m", messages=HI))._request_id for _ in range(3)}
    assert len(ids) == 3


async def test_an_error_carries_the_id_in_the_sdk_exception(app: Any) -> None:
    client = openai_client(app, await new_key(app))
    with pytest.raises(openai.NotFoundError) as err:
        await client.chat.completions.create(model="no-such-model", messages=HI)
    assert err.value.request_id is not None and err.value.request_id.startswith("req_")
    assert err.value.request_id == err.value.response.headers["x-costgate-request-id"]
    assert err.value.request_id in {r["request_id"] for r in await ledger_rows(app)}  # the refusal's row


async def test_a_bad_key_and_a_non_pipeline_route_carry_ids_too(app: Any) -> None:
    with pytest.raises(openai.AuthenticationError) as err:
        await openai_client(app, "sk-cg-wrong").chat.completions.create(model="m", messages=HI)
    assert err.value.request_id and err.value.request_id.startswith("req_")
    async with http_client(app) as http:
        for response in (await http.get("/v1/models"), await http.get("/v1/nope"), await http.get("/admin/teams")):
            assert response.headers["x-request-id"].startswith("req_")


async def test_the_client_request_id_is_echoed(app: Any) -> None:
    client = openai_client(app, await new_key(app))
    raw = await client.chat.completions.with_raw_response.create(
        model="m", messages=HI, extra_headers={"x-client-request-id": "my-trace-42"}
    )
    assert raw.headers["x-client-request-id"] == "my-trace-42"
    with pytest.raises(openai.NotFoundError) as err:
        await client.chat.completions.create(
            model="nope", messages=HI, extra_headers={"x-client-request-id": "my-trace-43"}
        )
    assert err.value.response.headers["x-client-request-id"] == "my-trace-43"
    async with http_client(app) as http:
        too_long = await http.get("/v1/models", headers={"x-client-request-id": "x" * 600})
    assert "x-client-request-id" not in too_long.headers  # OpenAI's limit is 512 characters


async def test_anthropic_sdk_gets_request_id(app: Any) -> None:
    client = anthropic_client(app, await new_key(app))
    raw = await client.messages.with_raw_response.create(model="m", max_tokens=10, messages=HI)
    message = await raw.parse()
    assert message._request_id is not None and message._request_id.startswith("req_")
    assert message._request_id == raw.headers["x-costgate-request-id"]
    assert "x-request-id" not in raw.headers  # Anthropic's API: its own header only
    assert message._request_id in {r["request_id"] for r in await ledger_rows(app)}
    with pytest.raises(anthropic.NotFoundError) as err:
        await client.messages.create(model="nope", max_tokens=10, messages=HI)
    assert err.value.request_id and err.value.request_id == err.value.body["request_id"]
    with pytest.raises(anthropic.AuthenticationError) as bad_key:
        await anthropic_client(app, "sk-cg-wrong").messages.create(model="m", max_tokens=10, messages=HI)
    assert bad_key.value.request_id and bad_key.value.request_id.startswith("req_")


async def test_an_unexpected_error_is_a_500_with_an_id(tmp_path) -> None:
    """A bug outside the pipeline (here, a route that raises) still answers in OpenAI's shape, with its id."""
    async with running_app(settings_for(tmp_path, [openai_model("m")])) as app:

        async def broken() -> None:
            raise RuntimeError("a bug")

        app.router.add_api_route("/v1/broken", broken, methods=["GET"])
        async with http_client(app) as http:
            response = await http.get("/v1/broken")
    assert response.status_code == 500
    assert response.json()["error"]["message"] == "internal error in the gateway"
    assert response.headers["x-request-id"].startswith("req_")
