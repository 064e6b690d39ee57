"""The journal of streams in flight (gateway/inflight.py): a real stream's progress lines, the
compaction that bounds the file, and recovery after a process died: which streams it charges,
once, settling the hold first. The SIGKILL over HTTP is tests/reliability/test_crash_holds.py."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from decimal import Decimal
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from gateway.context import Endpoint, Principal, RequestContext
from gateway.deployments import build_deployments
from gateway.inflight import StreamJournal, recover_streams
from gateway.settings import ModelConfig, Settings
from gateway.spend_control import SpendControl
from gateway.storage.counters import Admission, BudgetCheck, Lease
from gateway.storage.db import create_engine, create_tables, ledger
from gateway.storage.journal import Journal
from gateway.storage.ledger import LedgerRow, LedgerWriter
from policies.budgets import Budget, Hold, Period, Scope

PRICE = {"input_per_mtok": "1000000", "output_per_mtok": "1000000"}  # a dollar a token: easy sums
BUDGET = Budget(Scope.TEAM, "team_1", Period.TOTAL, 10**15)


def deployments():  # type: ignore[no-untyped-def]
    return build_deployments([ModelConfig(name="m", api_base="http://127.0.0.1:9/v1", price=PRICE)], None)


def stream_ctx(rid: str) -> RequestContext:
    ctx = RequestContext(
        request_id=rid,
        endpoint=Endpoint.CHAT,
        headers={},
        api_key=None,
        stream=True,
        body={"model": "m", "messages": [{"role": "user", "content": "count to ten"}]},
        principal=Principal("team_1", "team", "key_1"),
    )
    ctx.requested_model = ctx.served_model = "m"
    ctx.reservation = Hold("h-" + rid, 1000.0, (BUDGET,), 10**14)
    return ctx


@pytest.fixture
async def parts(tmp_path: Path) -> AsyncIterator[tuple[SpendControl, LedgerWriter, AsyncEngine]]:
    settings = Settings(database_url=f"sqlite:///{tmp_path}/l.db", data_dir=str(tmp_path))
    engine = create_engine(settings.database_url)
    await create_tables(engine)
    writer = LedgerWriter(engine)
    control = SpendControl(settings, engine, writer, CollectorRegistry())
    await control.store.initialize({BUDGET.counter(1000.0): (0, None)})
    yield control, writer, engine
    await control.stop()
    await engine.dispose()


async def hold(control: SpendControl, ctx: RequestContext) -> None:
    assert ctx.reservation is not None
    check = BudgetCheck(BUDGET.counter(1000.0), BUDGET.amount_pusd, None)
    await control.store.admit(
        Admission(
            ctx.reservation.id,
            1000.0,
            2000.0,
            ctx.reservation.want_pusd,
            (),
            (check,),
            Lease("dead-replica", time.time() + 60),
        )
    )


def relay(streams: StreamJournal, ctx: RequestContext, pieces: list[str]):  # type: ignore[no-untyped-def]
    watch = streams.watch(ctx)
    for piece in pieces:
        ctx.completion_text.append(piece)
        watch.relayed()
    return watch


async def test_a_dead_processs_unfinished_streams_are_charged_once(tmp_path: Path, parts) -> None:
    control, writer, engine = parts
    directory = tmp_path / "journal"
    dead = StreamJournal(directory, deployments(), every_chunks=2)
    cut, finished, recorded = stream_ctx("cut"), stream_ctx("finished"), stream_ctx("recorded")
    for ctx in (cut, finished, recorded):
        await hold(control, ctx)
    relay(dead, cut, [" one", " two", " three"])  # journaled at chunks 1 and 3
    relay(dead, finished, [" one"]).finished()  # settled whole before the crash
    relay(dead, recorded, [" one"])  # its final row reached the ledger; the `done` line did not
    recorded.cost = Decimal("0.000000000005")
    await writer.insert([LedgerRow.from_context(recorded).as_dict()])
    dead.journal.close(delete=False)  # the process dies: its segment is left, unlocked

    live = StreamJournal(directory, deployments())
    assert await recover_streams(live, writer, control) == 1
    async with engine.connect() as conn:
        rows = {r.request_id: r for r in await conn.execute(select(ledger))}
    assert set(rows) == {"cut", "recorded"} and rows["recorded"].cost_pusd == 5
    # the prompt and the three pieces relayed, a dollar a token
    row = rows["cut"]
    assert row.status == 500 and row.completion_tokens == 3 and row.prompt_tokens > 0
    assert row.cost_pusd == (row.prompt_tokens + 3) * 10**12
    [state] = await control.store.read([BUDGET.counter(1000.0)])
    assert state.spent_pusd == row.cost_pusd  # settled once, the hold released:
    assert state.reserved_pusd == 2 * 10**14  # only the two streams the recovery left alone
    assert await recover_streams(StreamJournal(directory, deployments()), writer, control) == 0  # nothing twice
    assert Journal(directory, "streams").orphans() == []  # the dead process's segment is gone


async def test_the_journal_stays_small_with_many_streams(tmp_path: Path) -> None:
    streams = StreamJournal(tmp_path / "journal", deployments(), every_chunks=1, max_bytes=20_000)
    watches = {}
    for i in range(300):
        ctx = stream_ctx(f"s{i}")
        watches[i] = relay(streams, ctx, [" tok"] * 5)
        if i >= 3:
            watches.pop(i - 3).finished()  # three streams open at a time
    files = list((tmp_path / "journal").glob("streams-*.jsonl"))
    assert len(files) == 1 and files[0].stat().st_size <= 20_000 + 4_000
    lines = Journal.read(files[0])
    latest = {r["request_id"]: r for r in lines if not r.get("done")}
    assert {"s297", "s298", "s299"} <= set(latest)
    assert latest["s299"]["row"]["completion_tokens"] == 5
    assert Decimal(latest["s299"]["row"]["cost_pusd"]) > 0
