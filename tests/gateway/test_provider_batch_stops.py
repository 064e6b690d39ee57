"""Batches at the provider (issue 26) across a gateway's stops: a restart polls the same provider
batch again; a gateway stopped after the provider accepted a batch but before it wrote the batch's
id, or before it asked the provider at all, or whose create timed out, submits nothing twice and
charges what the provider billed; a batch cancelled while no gateway ran is cancelled at the
provider at the next start. The fake provider and the helpers are test_provider_batches.py's."""

from __future__ import annotations

import asyncio
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.gateway import test_provider_batches
from tests.gateway.in_process import new_key, openai_client, running_app
from tests.gateway.test_provider_batches import (
    PICO,
    FakeProvider,
    charged,
    gateway_with_team,
    line,
    reserved,
    settings_for,
    submit,
    team_rows,
    wait_for,
    wait_provider_batches,
    wait_provider_lines,
)

provider = test_provider_batches.provider  # the fake provider's fixture, shared


async def provider_batch_ids(app: Any) -> list[str]:
    from sqlalchemy import select

    from gateway.storage.provider_batches import provider_batches

    async with app.state.gateway.db.connect() as conn:
        return [r.id for r in await conn.execute(select(provider_batches.c.id))]


async def restarted_completes_once(
    tmp_path: Path, provider: FakeProvider, batch_id: str, team_id: str, *, ended_while_down: bool = False
) -> dict[str, Any]:
    """A gateway started again on the same database finishes the caller's batch from the provider
    batches submitted before, and charges what the provider billed; the provider's bill. With
    `ended_while_down` the provider finishes them before the start, else after it."""
    if ended_while_down:
        await complete_all(provider)
    async with running_app(settings_for(tmp_path, provider)) as app:
        if not ended_while_down:
            await complete_all(provider)
        client = openai_client(app, await new_key(app, "batch-team"))
        done = await wait_for(client, batch_id, {"completed", "expired", "cancelled"})
        bill = await provider.get("/_bill")
        assert done.status == "completed" and done.request_counts.completed == 4
        assert bill["lines"] == 4  # nothing submitted twice (one provider batch, or two gather windows' worth)
        ledger = charged(await team_rows(app, team_id))
        assert ledger == Decimal(bill["usd"]).quantize(PICO) and ledger > 0
        assert await reserved(app) == 0
    return bill


async def complete_all(provider: FakeProvider) -> None:
    for provider_id in (await provider.get("/_bill"))["batch_ids"]:
        await provider.post(f"/_batches/{provider_id}/complete")


@pytest.mark.parametrize("provider", [None], indirect=True)
async def test_a_restart_polls_the_same_provider_batch_again(tmp_path: Path, provider: FakeProvider) -> None:
    async with gateway_with_team(tmp_path, provider) as (app, client, team_id):
        batch = await submit(client, [line(f"r-{i}", f"restart {i}") for i in range(4)])
        await wait_provider_lines(provider, 4)
    await restarted_completes_once(tmp_path, provider, batch.id, team_id)


async def hang(*_args: Any) -> None:
    await asyncio.Event().wait()  # until the stopping gateway cancels it


@pytest.mark.parametrize("provider", [None], indirect=True)
async def test_a_stop_after_the_provider_accepted_before_its_id_was_written_loses_nothing(
    tmp_path: Path, provider: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gateway.storage.provider_batches import ProviderBatchStore

    with monkeypatch.context() as patch:
        patch.setattr(ProviderBatchStore, "submitted", hang)  # the gateway never writes the provider's id
        async with gateway_with_team(tmp_path, provider) as (app, client, team_id):
            batch = await submit(client, [line(f"w-{i}", f"window {i}") for i in range(4)])
            await wait_provider_batches(provider, 1)
            assert [i.startswith("submitting:") for i in await provider_batch_ids(app)] == [True]
    await restarted_completes_once(tmp_path, provider, batch.id, team_id)


@pytest.mark.parametrize("provider", [None], indirect=True)
async def test_a_stop_before_the_provider_was_asked_submits_the_lines_once(
    tmp_path: Path, provider: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gateway.providers.batch_api import ProviderBatcher

    with monkeypatch.context() as patch:
        patch.setattr(ProviderBatcher, "_create", hang)  # recorded as submitting, never sent
        async with gateway_with_team(tmp_path, provider) as (app, client, team_id):
            batch = await submit(client, [line(f"b-{i}", f"before {i}") for i in range(4)])
            for _ in range(200):
                if await provider_batch_ids(app):
                    break
                await asyncio.sleep(0.05)
            assert [i.startswith("submitting:") for i in await provider_batch_ids(app)] == [True]
    assert (await provider.get("/_bill"))["batches_created"] == 0

    async def complete_when_created() -> None:
        await wait_provider_batches(provider, 1)
        await provider.post(f"/_batches/{(await provider.get('/_bill'))['batch_ids'][0]}/complete")

    completing = asyncio.create_task(complete_when_created())
    await restarted_completes_once(tmp_path, provider, batch.id, team_id)
    await completing


@pytest.mark.parametrize("provider", [None], indirect=True)
async def test_a_create_that_timed_out_after_the_provider_accepted_it_is_polled_not_failed(
    tmp_path: Path, provider: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gateway.providers.batch_api import ProviderBatcher

    create = ProviderBatcher._create

    async def accepted_then_timed_out(self: ProviderBatcher, *args: Any) -> str:
        await create(self, *args)
        raise httpx.ReadTimeout("the answer never came")

    monkeypatch.setattr(ProviderBatcher, "_create", accepted_then_timed_out)
    async with gateway_with_team(tmp_path, provider) as (app, client, team_id):
        batch = await submit(client, [line(f"t-{i}", f"timeout {i}") for i in range(4)])
        await wait_provider_batches(provider, 1)
        for _ in range(200):
            if not any(i.startswith("submitting:") for i in await provider_batch_ids(app)):
                break
            await asyncio.sleep(0.05)
        (provider_id,) = await provider_batch_ids(app)
        assert provider_id == (await provider.get("/_bill"))["batch_ids"][0]
        await provider.post(f"/_batches/{provider_id}/complete")
        done = await wait_for(client, batch.id, {"completed", "failed", "expired"})
        assert done.status == "completed" and done.request_counts.completed == 4
        bill = await provider.get("/_bill")
        assert bill["batches_created"] == 1
        ledger = charged(await team_rows(app, team_id))
        assert ledger == Decimal(bill["usd"]).quantize(PICO) and ledger > 0


@pytest.mark.parametrize("provider", [None], indirect=True)
async def test_a_batch_cancelled_while_no_gateway_ran_cancels_at_the_provider(
    tmp_path: Path, provider: FakeProvider
) -> None:
    from gateway.storage.batches import BatchStore
    from gateway.storage.db import create_engine

    async with gateway_with_team(tmp_path, provider) as (app, client, team_id):
        batch = await submit(client, [line(f"d-{i}", f"down {i}") for i in range(3)])
        await wait_provider_batches(provider, 1)
        (provider_id,) = (await provider.get("/_bill"))["batch_ids"]
    db = create_engine(f"sqlite:///{tmp_path}/db.sqlite")  # cancelled while the gateway is down
    await BatchStore(db).set_status(batch.id, "cancelling")
    await db.dispose()
    async with running_app(settings_for(tmp_path, provider)) as app:
        client = openai_client(app, await new_key(app, "batch-team"))
        done = await wait_for(client, batch.id, {"cancelled", "completed"})
        assert done.status == "cancelled" and done.request_counts.failed == 3
        fake_batch = await provider.post(f"/_batches/{provider_id}/complete")  # too late: it was cancelled
        assert fake_batch["status"] == "cancelled"
        assert (await provider.get("/_bill"))["batches_created"] == 1


@pytest.mark.parametrize("provider", [None], indirect=True)
async def test_a_timed_out_create_is_looked_for_again_while_the_provider_cannot_list(
    tmp_path: Path, provider: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gateway.core.errors import UpstreamError
    from gateway.providers.batch_api import ProviderBatcher

    create, find = ProviderBatcher._create, ProviderBatcher._find
    lookups: list[str] = []

    async def accepted_then_timed_out(self: ProviderBatcher, *args: Any) -> str:
        await create(self, *args)
        raise httpx.ReadTimeout("the answer never came")

    async def cannot_list_at_first(self: ProviderBatcher, record: Any) -> str | None:
        lookups.append(record.id)
        if len(lookups) < 3:
            raise UpstreamError("the provider's Batch API could not list batches")
        return await find(self, record)

    monkeypatch.setattr(ProviderBatcher, "_create", accepted_then_timed_out)
    monkeypatch.setattr(ProviderBatcher, "_find", cannot_list_at_first)
    async with gateway_with_team(tmp_path, provider) as (app, client, team_id):
        batch = await submit(client, [line(f"l-{i}", f"list {i}") for i in range(2)])
        await wait_provider_batches(provider, 1)
        for _ in range(200):
            if len(lookups) >= 3 and not any(i.startswith("submitting:") for i in await provider_batch_ids(app)):
                break
            await asyncio.sleep(0.05)
        (provider_id,) = (await provider.get("/_bill"))["batch_ids"]
        await provider.post(f"/_batches/{provider_id}/complete")
        done = await wait_for(client, batch.id, {"completed", "failed", "expired"})
        # the lines waited for the batch the provider had made: answered, billed once, charged once
        assert done.status == "completed" and done.request_counts.completed == 2
        bill = await provider.get("/_bill")
        assert bill["batches_created"] == 1
        ledger = charged(await team_rows(app, team_id))
        assert ledger == Decimal(bill["usd"]).quantize(PICO) and ledger > 0


@pytest.mark.parametrize("provider", [None], indirect=True)
async def test_a_provider_batch_that_ended_while_no_gateway_ran_is_collected_not_submitted_again(
    tmp_path: Path, provider: FakeProvider
) -> None:
    """The provider finished the batch while the gateway was down: at the next start its answers
    can arrive before the batch's lines ask for them again. An answer that came first is the
    line's answer; before, the line took it for a stale one and submitted itself again (the
    provider billing it twice, and the caller's batch waiting on a provider batch of its own)."""
    async with gateway_with_team(tmp_path, provider) as (app, client, team_id):
        batch = await submit(client, [line(f"e-{i}", f"ended while down {i}") for i in range(4)])
        await wait_provider_lines(provider, 4)
    bill = await restarted_completes_once(tmp_path, provider, batch.id, team_id, ended_while_down=True)
    assert bill["lines_submitted"] == 4  # nothing submitted twice
