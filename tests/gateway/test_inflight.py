"""The journal of streams in flight (gateway/upstream/inflight.py): a real stream's progress lines, the
compaction that bounds the file, and recovery after a process died: which streams it charges,
once, settling the hold first. The SIGKILL over HTTP is tests/reliability/test_crash_holds.py."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from decimal import Decimal
from pathlib import Path

import orjson
import pytest
from prometheus_client import CollectorRegistry
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from gateway.config.models_config import ModelConfig
from gateway.config.settings import Settings
from gateway.core.asked import Asked
from gateway.core.context import BatchLineRef, Endpoint, Principal, RequestContext
from gateway.spend.spend_control import SpendControl
from gateway.storage.counters import Admission, BudgetCheck, Lease, Settlement
from gateway.storage.db import create_engine, create_tables, ledger
from gateway.storage.journal import Journal
from gateway.storage.ledger import LedgerRow, LedgerWriter
from gateway.upstream.deployments import build_deployments
from gateway.upstream.inflight import StreamJournal, charge_stopped, held_record, recover_streams
from gateway.upstream.worst_case import unreported_prompt
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
        asked=Asked("m", stream=True),
        body={"model": "m", "messages": [{"role": "user", "content": "count to ten"}]},
        principal=Principal("team_1", "team", "key_1"),
    )
    ctx.outcome.served_model = "m"
    ctx.decided.hold = Hold("h-" + rid, 1000.0, (BUDGET,), 10**14)
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


async def hold(control: SpendControl, ctx: RequestContext, deadline: float = 2000.0) -> None:
    assert ctx.decided.hold is not None
    check = BudgetCheck(BUDGET.counter(1000.0), BUDGET.amount_pusd, None)
    await control.store.admit(
        Admission(
            ctx.decided.hold.id,
            1000.0,
            deadline,
            ctx.decided.hold.want_pusd,
            (),
            (check,),
            Lease("dead-replica", time.time() + 60),
        )
    )


def relay(streams: StreamJournal, ctx: RequestContext, pieces: list[str]):  # type: ignore[no-untyped-def]
    watch = streams.watch(ctx)
    for piece in pieces:
        ctx.generated.append(piece)  # as a relay appends what each chunk generated
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
    recorded.meter.cost = Decimal("0.000000000005")
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


async def test_a_replica_that_never_restarts_has_its_streams_charged_from_its_checkpoints(
    tmp_path: Path, parts
) -> None:
    """Issue 24, item 8: the progress is also checkpointed on the hold in the shared store; when
    the dead replica's lease ends, a live one reclaims the hold and charges the checkpoint — and a
    later restart on the dead one's disk charges nothing twice."""
    control, writer, engine = parts
    dead = StreamJournal(tmp_path / "dead", deployments(), every_chunks=2, checkpoints=control.store)
    cut, finished = stream_ctx("cut"), stream_ctx("finished")
    for ctx in (cut, finished):
        await hold(control, ctx, deadline=time.time() + 900)
    relay(dead, cut, [" one", " two", " three"])
    await asyncio.sleep(0.05)  # the background checkpoint writes land
    done = relay(dead, finished, [" one"])
    await asyncio.sleep(0.05)
    await control.store.settle(Settlement("h-finished", 1000.0, 7, (BUDGET.counter(1000.0),)))  # it ended
    done.finished()
    dead.journal.close(delete=False)  # the process dies and never comes back

    live = StreamJournal(tmp_path / "live", deployments(), checkpoints=control.store)
    assert await charge_stopped(live, writer, control) == 0  # its lease has not ended yet
    assert await control.store.reclaim(time.time() + 61) == 1  # ... now it has: the cut stream's hold
    assert await charge_stopped(live, writer, control) == 1
    async with engine.connect() as conn:
        rows = {r.request_id: r for r in await conn.execute(select(ledger))}
    row = rows["cut"]
    assert set(rows) == {"cut"} and row.status == 500 and row.completion_tokens == 3
    [state] = await control.store.read([BUDGET.counter(1000.0)])
    assert (state.spent_pusd, state.reserved_pusd) == (7 + row.cost_pusd, 0)
    assert await recover_streams(StreamJournal(tmp_path / "dead", deployments()), writer, control) == 0


async def test_a_checkpoint_counts_a_word_split_across_batches_once(tmp_path: Path) -> None:
    """Each batch of text is counted on its own; a trailing space counted alone is a token of
    its own, so it waits for the word it belongs to."""
    streams = StreamJournal(tmp_path / "journal", deployments(), every_chunks=1)
    ctx = stream_ctx("words")
    watch = relay(streams, ctx, ["hello ", "hello ", "hello ", "hello"])
    assert watch.record()["row"]["completion_tokens"] == 4


async def test_the_first_checkpoint_takes_the_prompt_the_hold_counted(tmp_path: Path) -> None:
    """Issue 24: the stream's prompt was counted again at its first chunk (where a million tabs
    made tiktoken fail); the hold's count, the bound a provider can bill, is taken instead."""
    streams = StreamJournal(tmp_path / "journal", deployments(), every_chunks=1)
    ctx = stream_ctx("bound")
    ctx.prompt_bounds["m"] = 12_345
    watch = relay(streams, ctx, ["one"])
    assert watch.record()["row"]["prompt_tokens"] == 12_345


async def test_a_checkpoint_without_a_holds_count_takes_the_bound_the_charge_would(tmp_path: Path) -> None:
    """A stream no budget held has no count of its prompt yet: its checkpoint counts the prompt as
    the relay's own charge would when the upstream reports none (worst_case.unreported_prompt:
    the bound a provider can bill, its UTF-8 bytes for a tokenizer costgate does not run), not a
    tiktoken estimate below it."""
    streams = StreamJournal(tmp_path / "journal", deployments(), every_chunks=1)
    ctx = stream_ctx("unheld")
    ctx.body["messages"][0]["content"] = "数え方 " * 50  # CJK: many more bytes than tiktoken tokens
    watch = relay(streams, ctx, ["one"])
    assert watch.record()["row"]["prompt_tokens"] == unreported_prompt(ctx, streams.deployments["m"])


async def test_a_dead_replicas_batch_line_at_its_provider_is_not_charged_its_hold(tmp_path: Path, parts) -> None:
    """A Batch API line whose provider's own batch runs it is resumed by the replica that takes
    the caller's batch over, which waits for the same provider batch and charges the answer then:
    charging the dead replica's hold as well would charge the provider's one bill twice. A line
    the gateway called itself is charged its whole hold (the provider may have billed it)."""
    control, writer, engine = parts
    lines = {}
    for name, at_provider in (("at-provider", True), ("called", False)):
        ctx = stream_ctx(name)
        ctx.asked = Asked("m")
        ctx.batch_line = BatchLineRef("batch_1", name, at_provider)
        assert ctx.decided.hold is not None
        check = BudgetCheck(BUDGET.counter(1000.0), BUDGET.amount_pusd, None)
        record = orjson.dumps(held_record(ctx, ctx.decided.hold)).decode()
        lease = Lease("dead-replica", time.time() + 60)
        admission = Admission(ctx.decided.hold.id, 1000.0, time.time() + 900, 10**14, (), (check,), lease, record)
        await control.store.admit(admission)
        lines[name] = ctx
    live = StreamJournal(tmp_path / "live", deployments(), checkpoints=control.store)
    assert await control.store.reclaim(time.time() + 61) == 2
    assert await charge_stopped(live, writer, control) == 2
    async with engine.connect() as conn:
        rows = {r.request_id: r for r in await conn.execute(select(ledger))}
    assert (rows["called"].cost_pusd, rows["at-provider"].cost_pusd) == (10**14, 0)
    [state] = await control.store.read([BUDGET.counter(1000.0)])
    assert (state.spent_pusd, state.reserved_pusd) == (10**14, 0)  # both holds released
