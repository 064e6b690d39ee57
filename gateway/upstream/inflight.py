"""Streams in flight, journaled as they go, so that a replica that dies mid-stream still
charges what it relayed.

A stream's progress — the ledger row it would have now (the tokens relayed so far and what
they cost) and the budget hold it must settle — is appended to
`<data_dir>/journal/streams-*.jsonl` (gateway/storage/journal.py: one `write`, no fsync, kept
by the kernel through a SIGKILL) at its first chunk, then every `every_chunks` chunks or
`every_s` seconds, whichever comes first. Once the stream has settled (its real row is in the
ledger journal) a `done` line follows. The segment is compacted past `max_bytes`: the last
line of each open stream moves to a fresh segment and the old one goes.

At start, `recover_streams` reads the segments of processes that died (flock, as for the
ledger journal) and charges every stream without a `done` line and without a ledger row: it
settles the stream's hold with the journaled cost (the store's settle is idempotent per hold,
and commits the cost once whether or not the hold was reclaimed already: either order of
reclaim and recovery counts the cost once), then writes the row (insert-or-ignore). A row
already in the ledger means the stream finished and was charged in full: nothing is done.

The same progress is checkpointed on the stream's budget hold in the counter store (Redis), where
every replica sees it (`BudgetStore.checkpoint`, written off the stream's path, one write at a
time per stream). A replica that dies and never comes back leaves its holds to be reclaimed by
another when its lease ends (gateway/spend/leases.py); reclaiming a hold that carries a checkpoint
queues it (lua/holds.lua), and every replica takes that queue now and then (`charge_stopped`)
and charges each stream as a restart would charge it from the journal: the hold settled with
the checkpoint's cost (idempotent: a stream charged once, by whichever path comes first), the
row inserted unless one is there. So a rescheduled pod, whose disk is gone, is charged too.

The cost journaled is an estimate — the upstream's usage comes only with the last chunk —
from tiktoken counts of the prompt and of the text relayed so far, priced like the final
charge; up to `every_chunks` chunks (or `every_s` seconds) of the end can be missing.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy.exc import SQLAlchemyError

from gateway.core.context import RequestContext
from gateway.core.tokens import count_text
from gateway.spend.spend_control import SpendControl
from gateway.storage.counters import BudgetStore, StoreUnavailable
from gateway.storage.journal import Journal
from gateway.storage.ledger import LedgerRow, LedgerWriter
from gateway.upstream.deployments import Deployment
from gateway.upstream.worst_case import unreported_prompt
from policies.budgets import Hold
from policies.pricing import Usage, cost_of, in_picos, to_pico

log = logging.getLogger("costgate.inflight")

STOPPED = "the gateway replica stopped mid-stream: charged for what its journal saw relayed"
STOPPED_BEFORE = "the gateway replica stopped before the request was settled: charged its whole hold"
STOPPED_AT_PROVIDER = "the gateway replica stopped while the line was at its provider's batch: charged when resumed"


class StreamJournal:
    def __init__(
        self,
        directory: Path,
        deployments: Mapping[str, Deployment],
        every_chunks: int = 16,
        every_s: float = 1.0,
        max_bytes: int = 4 << 20,
        checkpoints: BudgetStore | None = None,
    ) -> None:
        self.journal = Journal(directory, kind="streams")
        self.deployments = deployments
        self.every_chunks = every_chunks
        self.every_s = every_s
        self.max_bytes = max_bytes
        self.checkpoints = checkpoints  # where other replicas see the progress; None: the journal only
        self._open: dict[str, dict[str, Any]] = {}  # request id -> its last progress line
        self._writing: dict[str, asyncio.Task[None]] = {}  # request id -> the task writing its checkpoints
        self._latest: dict[str, tuple[str, str]] = {}  # request id -> (hold id, progress) not yet written
        self._charger: asyncio.Task[None] | None = None

    def watch(self, ctx: RequestContext) -> StreamWatch:
        return StreamWatch(self, ctx)

    def progress(self, record: dict[str, Any]) -> None:
        self._open[record["request_id"]] = record
        self._append(record)
        self._checkpoint(record)

    def _checkpoint(self, record: dict[str, Any]) -> None:
        """Write the progress on the stream's hold, in the background, one write at a time per
        stream: progress made while a write is in flight replaces what waits behind it."""
        rid, hold = record["request_id"], record["hold"]
        if self.checkpoints is None or hold is None:
            return
        self._latest[rid] = (hold["id"], orjson.dumps(record).decode())
        if rid not in self._writing:
            self._writing[rid] = asyncio.create_task(self._write_checkpoints(self.checkpoints, rid))

    async def _write_checkpoints(self, store: BudgetStore, rid: str) -> None:
        try:
            while (latest := self._latest.pop(rid, None)) is not None:
                await store.checkpoint(*latest)
        except StoreUnavailable as err:  # the local journal still has it
            self._latest.pop(rid, None)
            log.warning("stream checkpoint not written: %s", err)
        finally:
            self._writing.pop(rid, None)

    def start(self, ledger: LedgerWriter, spend: SpendControl) -> None:
        """Charge, now and then, the streams of replicas that stopped (`charge_stopped`)."""
        self._charger = asyncio.create_task(self._charge_loop(ledger, spend), name="stopped-streams")

    async def _charge_loop(self, ledger: LedgerWriter, spend: SpendControl) -> None:
        while True:
            try:
                await charge_stopped(self, ledger, spend)
            except (StoreUnavailable, SQLAlchemyError, OSError) as err:  # taken again at the next tick
                log.warning("stopped replicas' streams not charged yet: %s", err)
            await asyncio.sleep(spend.leases.tick_s)

    def done(self, request_id: str) -> None:
        if self._open.pop(request_id, None) is not None:
            self._append({"request_id": request_id, "done": True})

    def _append(self, record: dict[str, Any]) -> None:
        self.journal.append(record)
        if self.journal.written > self.max_bytes:
            self.journal.seal()
            for line in self._open.values():
                self.journal.append(line)
            self.journal.release_sealed()

    def close(self) -> None:
        """Streams still open keep their lines for the next start (there should be none:
        every stream settles before the app stops)."""
        if self._charger is not None:
            self._charger.cancel()
        self.journal.close(delete=not self._open)


class StreamWatch:
    """One stream's progress, journaled now and then as its chunks are relayed."""

    def __init__(self, journal: StreamJournal, ctx: RequestContext) -> None:
        self.journal = journal
        self.ctx = ctx
        self.chunks = 0
        self.last_at = 0.0
        self.journaled = False
        # What earlier calls of this request were charged (a cascade's tiers): the stream adds to it.
        self.base_usage, self.base_cost = ctx.meter.usage, ctx.meter.cost
        self.prompt_tokens: int | None = None
        self.completion_tokens = 0
        self.counted_parts = 0  # how many of ctx.generated are counted
        # Trailing whitespace of the text counted so far, counted with what follows it: tiktoken
        # joins a space to the next word, so a batch counted with its trailing space alone
        # would count one token too many at every checkpoint.
        self.uncounted = ""

    def relayed(self) -> None:
        """A chunk was handed to the client (journaled right after the send, before the next
        upstream chunk is awaited: the first token never waits for a journal write)."""
        self.chunks += 1
        if (
            self.chunks - 1
        ) % self.journal.every_chunks == 0 or time.monotonic() - self.last_at >= self.journal.every_s:
            self.last_at = time.monotonic()
            self.journal.progress(self.record())
            self.journaled = True

    def finished(self) -> None:
        """The stream settled: its ledger row is journaled, nothing is left to charge."""
        if self.journaled:
            self.journal.done(self.ctx.request_id)

    def record(self) -> dict[str, Any]:
        usage, cost = self._so_far()
        return stopped_record(self.ctx, self.ctx.decided.hold, usage, to_pico(cost), STOPPED)

    def _so_far(self) -> tuple[Usage, Decimal]:
        ctx = self.ctx
        if ctx.meter.usage != self.base_usage or ctx.meter.cost != self.base_cost:
            return ctx.meter.usage, ctx.meter.cost  # the stream is charged already (its last chunks): exact
        dep = self.journal.deployments.get(ctx.outcome.served_model or "")
        if dep is None:
            return ctx.meter.usage, ctx.meter.cost
        model = dep.config.upstream_model
        if self.prompt_tokens is None:  # what the charge takes when unreported: the hold's count, not again
            self.prompt_tokens = unreported_prompt(ctx, dep)
        new = ctx.generated[self.counted_parts :]
        self.counted_parts += len(new)
        text = self.uncounted + "".join(new)
        counted = text.rstrip()
        self.uncounted = text[len(counted) :]
        if counted:
            self.completion_tokens += count_text(counted, model)
        stream = Usage(self.prompt_tokens, self.completion_tokens)
        factor = ctx.lane_factor(dep.config.provider)
        return ctx.meter.usage + stream, ctx.meter.cost + in_picos(cost_of(stream, dep.price) * factor)


def held_record(ctx: RequestContext, hold: Hold) -> dict[str, Any]:
    """What a request is charged if its replica dies before anything better is known (its first
    checkpoint, written with the hold): the whole hold, fail-closed — the upstream may have
    answered, and billed, already. But a Batch API line that its provider's own batch runs is
    charged nothing here: the caller's batch is resumed by whichever replica takes its lease, the
    line waits for the same provider batch (gateway/providers/batch_api.py), and its answer is
    charged then, once, as the provider bills it once."""
    if ctx.batch_line is not None and ctx.batch_line.at_provider:
        return stopped_record(ctx, hold, ctx.meter.usage, 0, STOPPED_AT_PROVIDER)
    return stopped_record(ctx, hold, ctx.meter.usage, hold.want_pusd, STOPPED_BEFORE)


def stopped_record(ctx: RequestContext, hold: Hold | None, usage: Usage, cost_pusd: int, error: str) -> dict[str, Any]:
    """A request's charge should its replica stop now: its row so far (status 500) and its hold."""
    row = replace(
        LedgerRow.from_context(ctx),
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        cost_pusd=cost_pusd,
        status=500,
        error=error,
    )
    return {
        "request_id": ctx.request_id,
        "row": row.as_dict(),
        "team_id": ctx.principal.team_id if ctx.principal else None,
        "hold": None
        if hold is None
        else {"id": hold.id, "now": hold.now, "counters": [b.counter(hold.now) for b in hold.budgets]},
    }


async def recover_streams(streams: StreamJournal, ledger: LedgerWriter, spend: SpendControl) -> int:
    """Charge the streams that dead processes left unfinished; returns how many."""
    paths = streams.journal.orphans()
    latest: dict[str, dict[str, Any]] = {}
    finished: set[str] = set()
    for path in paths:
        for record in Journal.read(path):
            if record.get("done"):
                finished.add(record["request_id"])
            else:
                latest[record["request_id"]] = record
    charged = await _charge([r for rid, r in latest.items() if rid not in finished], ledger, spend)
    if charged:
        log.warning("charged %d streams a stopped process left unfinished, from its journal", charged)
    for path in paths:
        path.unlink(missing_ok=True)
    return charged


async def charge_stopped(streams: StreamJournal, ledger: LedgerWriter, spend: SpendControl) -> int:
    """Charge the streams whose holds were reclaimed unsettled (their replica died), from the
    checkpoints the store queued; returns how many. A checkpoint taken is charged here or, if
    this fails, lost to the store's queue (the dead replica's journal still has it)."""
    if streams.checkpoints is None:
        return 0
    records = [orjson.loads(r) for r in await streams.checkpoints.stopped(100)]
    charged = await _charge(records, ledger, spend)
    if charged:
        log.warning("charged %d streams of a replica that stopped, from their checkpoints", charged)
    return charged


async def _charge(records: list[dict[str, Any]], ledger: LedgerWriter, spend: SpendControl) -> int:
    """Charge each stream once: settle its hold with its cost, then write its row, unless its
    row is in the ledger already (it finished, or was charged by another path)."""
    charged = await ledger.existing([r["request_id"] for r in records])
    pending = [r for r in records if r["request_id"] not in charged]
    for record in pending:  # settle first, as a live stream does: a crash here redoes it harmlessly
        hold, row = record["hold"], record["row"]
        if hold is not None and record["team_id"] is not None:
            await spend.settle_counters(
                hold["id"], hold["now"], tuple(hold["counters"]), row["cost_pusd"], record["team_id"]
            )
    if pending:
        await ledger.insert([r["row"] for r in pending])
    return len(pending)
