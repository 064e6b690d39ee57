"""Batches at the provider (issue 26, part 1), in process: Batch API lines for a model whose
provider sells batch processing (`batch_api`) run there as a provider batch — the fake's
synchronous endpoint receives nothing — and the team's ledger equals the provider's bill to the
cent, with the batch discount in `provider_tier_saved`. The provider's cancellation and expiry
reach the caller's batch; a gateway restarted while the provider works polls the same provider
batch again instead of submitting its lines twice. The fake provider is a real local server
(tests/fakes/fake_openai.py with its Batch API, tests/fakes/fake_batches.py) in a thread."""

from __future__ import annotations

import asyncio
import io
import json
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from gateway.config.settings import Settings
from tests.fakes.fake_openai import create_fake_app
from tests.gateway.in_process import ADMIN_KEY, ledger_rows, new_key, openai_client, running_app
from tests.support import ThreadServer

UPSTREAM = "gpt-4o-mini"
LIST = {"input_per_mtok": "0.15", "output_per_mtok": "0.6"}
BATCH = {"input_per_mtok": "0.075", "output_per_mtok": "0.3"}
BATCH_IN, BATCH_OUT = Decimal("0.075") / 10**6, Decimal("0.3") / 10**6
LIST_IN, LIST_OUT = Decimal("0.15") / 10**6, Decimal("0.6") / 10**6
PICO = Decimal("1e-12")


class FakeProvider:
    """The fake OpenAI-compatible provider, served by uvicorn in a thread."""

    def __init__(self, complete_after_s: float | None) -> None:
        app = create_fake_app({UPSTREAM: (BATCH_IN, BATCH_OUT)}, complete_after_s)
        self.served = ThreadServer(app)
        self.base = self.served.base

    async def get(self, path: str) -> Any:
        async with httpx.AsyncClient() as http:
            return (await http.get(self.base + path)).json()

    async def post(self, path: str) -> Any:
        async with httpx.AsyncClient() as http:
            return (await http.post(self.base + path)).json()

    def stop(self) -> None:
        self.served.stop(10)


@pytest.fixture
def provider(request: pytest.FixtureRequest) -> Iterator[FakeProvider]:
    fake = FakeProvider(getattr(request, "param", 0.2))
    yield fake
    fake.stop()


def at_provider(name: str, upstream: str, provider: FakeProvider) -> dict[str, Any]:
    return {
        "name": name,
        "provider": "openai",
        "model": upstream,
        "api_base": provider.base + "/v1",
        "price": {**LIST, "batch": BATCH},
        "batch_api": True,
        "max_retries": 0,
    }


def settings_for(work: Path, provider: FakeProvider) -> Settings:
    models = [at_provider("mini", UPSTREAM, provider), at_provider("refuser", "reject", provider)]
    return Settings.model_validate(
        {
            "admin_key": ADMIN_KEY,
            "database_url": f"sqlite:///{work}/db.sqlite",
            "data_dir": str(work / "data"),
            "cache": {"exact": {"enabled": False}, "semantic": {"enabled": False}},
            "models": models,
            "batch": {
                "poll_interval_s": 0.1,
                "lease_s": 2,
                "provider_poll_s": 0.1,
                "provider_gather_s": 0.2,
                "shutdown_grace_s": 0.2,  # the restarts here stop with lines at the provider: no wait
            },
        }
    )


def line(custom_id: str, text: str, model: str = "mini") -> dict[str, Any]:
    body = {"model": model, "messages": [{"role": "user", "content": text}]}
    return {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body}


async def submit(client: openai.AsyncOpenAI, lines: list[dict[str, Any]]) -> Any:
    data = b"".join(json.dumps(x).encode() + b"\n" for x in lines)
    f = await client.files.create(file=("input.jsonl", io.BytesIO(data)), purpose="batch")
    return await client.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h")


async def wait_for(client: openai.AsyncOpenAI, batch_id: str, statuses: set[str], timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        batch = await client.batches.retrieve(batch_id)
        if batch.status in statuses:
            return batch
        await asyncio.sleep(0.05)
    raise TimeoutError(f"batch {batch_id} never reached {statuses}: {batch.status}")


async def wait_provider_batches(provider: FakeProvider, n: int) -> None:
    for _ in range(400):
        if (await provider.get("/_bill"))["batches_created"] >= n:
            return
        await asyncio.sleep(0.05)
    raise TimeoutError("the gateway submitted no provider batch")


async def wait_provider_lines(provider: FakeProvider, n: int) -> None:
    """Until the provider holds `n` lines: on a loaded machine a caller's lines can reach the
    provider in two gather windows, so two provider batches."""
    for _ in range(400):
        if (await provider.get("/_bill"))["lines_submitted"] >= n:
            return
        await asyncio.sleep(0.05)
    raise TimeoutError(f"the provider never held {n} lines")


async def read(client: openai.AsyncOpenAI, file_id: str | None) -> list[dict[str, Any]]:
    if file_id is None:
        return []
    content = await client.files.content(file_id)
    return [json.loads(x) for x in content.content.splitlines() if x]


async def team_rows(app: Any, team_id: str) -> list[dict[str, Any]]:
    return [r for r in await ledger_rows(app) if r["team_id"] == team_id]


def charged(rows: list[dict[str, Any]]) -> Decimal:
    """What the ledger rows charge, in dollars."""
    return sum((Decimal(r["cost_pusd"]) for r in rows), Decimal(0)) * PICO


@asynccontextmanager
async def gateway_with_team(work: Path, provider: FakeProvider) -> AsyncIterator[tuple[Any, openai.AsyncOpenAI, str]]:
    async with running_app(settings_for(work, provider)) as app:
        key = await new_key(app, "batch-team")
        principal = await app.state.gateway.keys.authenticate(key)
        yield app, openai_client(app, key), principal.team_id


async def reserved(app: Any) -> Decimal:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw.test") as http:
        budgets = (await http.get("/admin/budgets", headers={"authorization": f"Bearer {ADMIN_KEY}"})).json()
    return sum((Decimal(b["reserved_usd"]) for b in budgets["data"]), Decimal(0))


async def set_budget(app: Any) -> None:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw.test") as http:
        answer = await http.put(
            "/admin/budgets",
            headers={"authorization": f"Bearer {ADMIN_KEY}"},
            json={"scope": "team", "id": "batch-team", "amount_usd": "10", "period": "monthly"},
        )
        assert answer.status_code == 200, answer.text


async def test_ten_lines_run_at_the_provider_as_one_batch_and_the_ledger_is_its_bill(
    tmp_path: Path, provider: FakeProvider
) -> None:
    async with gateway_with_team(tmp_path, provider) as (app, client, team_id):
        await set_budget(app)
        lines = [line(f"q-{i}", f"batch question number {i} " + "word " * i) for i in range(10)]
        lines.append(line("refused", "x", model="refuser"))  # the provider answers it 400, unbilled
        batch = await submit(client, lines)
        done = await wait_for(client, batch.id, {"completed", "failed", "expired"})
        assert done.status == "completed"
        assert (done.request_counts.completed, done.request_counts.failed) == (10, 1)

        stats = await provider.get("/_stats")
        assert stats.get(UPSTREAM, 0) == 0  # the synchronous endpoint received nothing
        bill = await provider.get("/_bill")
        assert bill["batches_created"] == 2 and bill["lines"] == 10  # one provider batch per model

        output = await read(client, done.output_file_id)
        assert [o["custom_id"] for o in output] == [f"q-{i}" for i in range(10)]
        assert output[3]["response"]["body"]["choices"][0]["message"]["content"].startswith("echo: batch question")
        (refused,) = await read(client, done.error_file_id)
        assert refused["custom_id"] == "refused" and refused["response"]["status_code"] == 400

        rows = await team_rows(app, team_id)
        answered = [r for r in rows if r["status"] == 200]
        assert len(answered) == 10 and {r["tier"] for r in answered} == {"batch"}
        ledger = charged(rows)
        assert ledger == Decimal(bill["usd"]).quantize(PICO) and ledger > 0  # to the cent, and below it
        assert Decimal(done.model_extra["cost_usd"]) == ledger
        list_price = sum(r["prompt_tokens"] * LIST_IN + r["completion_tokens"] * LIST_OUT for r in answered)
        saved = sum((Decimal(r["provider_tier_saved_pusd"]) for r in rows), Decimal(0)) * PICO
        assert saved == list_price - ledger and saved > 0
        assert sum(r["saved_pusd"] for r in rows) == 0  # the gateway itself gave nothing away
        assert await reserved(app) == 0  # every line's hold settled


@pytest.mark.parametrize("provider", [None], indirect=True)
async def test_cancelling_cancels_the_provider_batch_and_releases_every_hold(
    tmp_path: Path, provider: FakeProvider
) -> None:
    async with gateway_with_team(tmp_path, provider) as (app, client, team_id):
        await set_budget(app)
        batch = await submit(client, [line(f"c-{i}", f"cancel me {i}") for i in range(3)])
        await wait_provider_batches(provider, 1)
        assert await reserved(app) > 0  # the lines hold their batch price while the provider works
        await client.batches.cancel(batch.id)
        done = await wait_for(client, batch.id, {"cancelled", "completed"})
        assert done.status == "cancelled"
        errors = await read(client, done.error_file_id)
        assert sorted(e["custom_id"] for e in errors) == ["c-0", "c-1", "c-2"]
        assert {e["response"]["body"]["error"]["code"] for e in errors} == {"batch_cancelled"}
        bill = await provider.get("/_bill")
        assert Decimal(bill["usd"]) == 0
        rows = await team_rows(app, team_id)
        assert sum(r["cost_pusd"] for r in rows) == 0
        assert await reserved(app) == 0


@pytest.mark.parametrize("provider", [None], indirect=True)
async def test_a_provider_batch_that_expires_expires_the_callers(tmp_path: Path, provider: FakeProvider) -> None:
    async with gateway_with_team(tmp_path, provider) as (app, client, team_id):
        await set_budget(app)
        batch = await submit(client, [line(f"e-{i}", f"expire {i}") for i in range(4)])
        await wait_provider_batches(provider, 1)
        ids = (await provider.get("/_bill"))["batch_ids"]  # the provider's own ids (the gateway's row may
        await provider.post(f"/_batches/{ids[0]}/expire?answered=2")  # still be `submitting`)
        done = await wait_for(client, batch.id, {"expired", "completed"})
        assert done.status == "expired"
        assert (done.request_counts.completed, done.request_counts.failed) == (2, 2)
        errors = await read(client, done.error_file_id)
        assert {e["response"]["body"]["error"]["code"] for e in errors} == {"batch_expired"}
        bill = await provider.get("/_bill")
        rows = await team_rows(app, team_id)
        ledger = charged(rows)
        assert ledger == Decimal(bill["usd"]).quantize(PICO) and ledger > 0
        assert await reserved(app) == 0


def _model(**fields: Any) -> dict[str, Any]:
    return {"name": "m", "provider": "openai", "api_base": "https://api.openai.com/v1", **fields}


@pytest.mark.parametrize(
    "fields, on",
    [
        (_model(model="gpt-4o-mini"), True),  # OpenAI itself, a batch price in litellm's map
        (_model(model="ft:mine", price=LIST), False),  # no batch price: nothing to charge it at
        (_model(model="gpt-4o-mini", batch_api=False), False),
        (_model(model="gpt-4o-mini", api_base="http://vllm.test/v1"), False),  # another host: asked for only
        (_model(model="x", api_base="http://vllm.test/v1", price={**LIST, "batch": BATCH}, batch_api=True), True),
    ],
)
def test_which_models_use_their_providers_batch_api(tmp_path: Path, fields: dict[str, Any], on: bool) -> None:
    from gateway.service import with_batch_apis
    from gateway.storage.provider_batches import ProviderBatchStore
    from gateway.upstream.deployments import build_deployments

    settings = Settings.model_validate({"models": [fields], "data_dir": str(tmp_path)})
    deployments = with_batch_apis(build_deployments(settings.models), ProviderBatchStore(None), settings.batch, None)  # type: ignore[arg-type]
    assert (deployments["m"].batcher is not None) is on


def test_batch_api_without_a_batch_price_or_an_http_upstream_is_refused(tmp_path: Path) -> None:
    from gateway.service import with_batch_apis
    from gateway.storage.provider_batches import ProviderBatchStore
    from gateway.upstream.deployments import build_deployments

    unpriced = Settings.model_validate(
        {"models": [_model(model="x", api_base="http://vllm.test/v1", price=LIST, batch_api=True)]}
    )
    with pytest.raises(ValueError, match="batch price"):
        with_batch_apis(build_deployments(unpriced.models), ProviderBatchStore(None), unpriced.batch, None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="batch_api needs provider openai"):
        Settings.model_validate(
            {"models": [{"name": "c", "provider": "litellm", "model": "claude-x", "batch_api": True}]}
        )
