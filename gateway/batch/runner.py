"""The batch worker: runs every unfinished batch's remaining lines through the gateway pipeline.

Each line becomes a RequestContext like a synchronous request's — authenticated (from the
batch's key id, checked live), tagged `lane:batch` with the batch id as its trace id, in the
BATCH priority class, charged at `1 - discount` of list price — and goes through
`pipeline.handle`: budgets, caches, routing and the ledger row all apply.

Resuming: a line's result is stored as soon as it is known; after a restart (or when another
gateway replica takes over an expired lease) only lines without a result run. A crash between
a line's answer and its stored result runs that line again: its upstream call may repeat, but
the output file holds it once.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections import deque
from collections.abc import Awaitable, Callable
from decimal import Decimal
from typing import Any

import orjson
from prometheus_client import CollectorRegistry, Counter
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine
from starlette.responses import Response, StreamingResponse

from gateway.batch.input import ENDPOINTS, BatchLine, parse_input
from gateway.config.settings import BatchConfig
from gateway.core.context import BatchLineRef, Decisions, RequestContext
from gateway.core.errors import GatewayError, error_body
from gateway.providers.batch_api import ProviderBatcher
from gateway.storage.batches import BatchRecord, BatchStore, ResultRow
from gateway.storage.files import FileStore
from gateway.storage.keys import KeyStore
from gateway.storage.provider_batches import ProviderBatchStore
from policies.pricing import to_pico

log = logging.getLogger("costgate.batch")

TRANSIENT = frozenset({429, 500, 502, 503, 504})
LANE_TAG = "lane:batch"


def output_line(row: ResultRow) -> bytes:
    """OpenAI's output/error file line for one request."""
    return (
        orjson.dumps(
            {
                "id": "batch_req_" + row.request_id.removeprefix("req_"),
                "custom_id": row.custom_id,
                "response": {
                    "status_code": row.status_code,
                    "request_id": row.request_id,
                    "body": orjson.loads(row.body),
                },
                "error": None,
            }
        )
        + b"\n"
    )


def failures_after(row: ResultRow, failures: int) -> int:
    """Server errors use up a line's attempts. Waiting for capacity (a busy batch lane, a rate
    limit) does not: the batch has its whole completion window for that."""
    if row.status_code not in TRANSIENT:
        return failures
    waiting = row.status_code == 429 or '"batch_lane_busy"' in row.body
    return failures if waiting else failures + 1


def retry_delay_s(tries: int) -> float:
    """0.25 s before the first retry, doubling, at most 10 s."""
    return min(0.25 * 2.0 ** min(tries - 1, 6), 10.0)


async def _body_of(response: Response) -> bytes:
    if isinstance(response, StreamingResponse):
        return b"".join([c.encode() if isinstance(c, str) else bytes(c) async for c in response.body_iterator])
    return bytes(response.body)


class BatchRunner:
    """Claims unfinished batches (a lease per batch) and runs each in its own task."""

    def __init__(
        self,
        config: BatchConfig,
        db: AsyncEngine,
        data_dir: str,
        keys: KeyStore,
        handle: Callable[[RequestContext], Awaitable[Response]],
        registry: CollectorRegistry,
        batchers: list[ProviderBatcher] | None = None,
    ) -> None:
        self.config = config
        # Deployments whose provider runs batch lines itself (gateway/providers/batch_api.py): their
        # lines all start at once (each waits for its provider batch), the others `concurrency` at a time.
        self.batchers = batchers or []
        self.at_provider = frozenset(b.model for b in self.batchers)
        self.keys = keys
        self.handle = handle  # the gateway pipeline: every line runs through it like a request
        self.store = BatchStore(db)
        self.provider_batches = ProviderBatchStore(db)
        self.files = FileStore(db, data_dir)
        self.owner = "gw_" + secrets.token_hex(8)
        self.price_factor = Decimal(1) - self.config.discount
        self._jobs: dict[str, asyncio.Task[None]] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.stopping = False  # set at shutdown: jobs take no new lines
        self.lines = Counter(
            "costgate_batch_lines",
            "Batch lines answered (ok: 2xx, failed: in the error file)",
            ["outcome"],
            registry=registry,
        )

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="batch-runner")

    def wake(self) -> None:
        """A batch was created or cancelled: look now rather than at the next poll."""
        self._wake.set()

    async def stop(self) -> None:
        """Let lines in flight finish (their results are kept) for up to the config's
        `shutdown_grace_s`, then stop."""
        grace_s = self.config.shutdown_grace_s
        self.stopping = True
        if self._task is not None:
            self._task.cancel()
        held, jobs = list(self._jobs), list(self._jobs.values())
        if jobs:
            await asyncio.wait(jobs, timeout=grace_s)
        tasks = [t for t in (self._task, *jobs) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for batch_id in held:
            try:
                await self.store.release(batch_id, self.owner)  # another replica may go on at once
            except SQLAlchemyError as err:
                log.warning("could not release the lease of %s: %s", batch_id, err)

    async def _run(self) -> None:
        while True:
            try:
                for batch_id in await self.store.claim(self.owner, self.config.lease_s, set(self._jobs)):
                    task = asyncio.create_task(self._run_batch(batch_id), name=f"batch-{batch_id}")
                    self._jobs[batch_id] = task
            except SQLAlchemyError as err:
                log.warning("batch claim failed: %s", err)
            try:
                await asyncio.wait_for(self._wake.wait(), self.config.poll_interval_s)
            except TimeoutError:
                pass
            self._wake.clear()

    async def _run_batch(self, batch_id: str) -> None:
        try:
            await BatchJob(self, await self.store.get(batch_id)).run()
            await self.store.release(batch_id, self.owner)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("batch %s stopped; it will be resumed", batch_id)
        finally:
            self._jobs.pop(batch_id, None)


class BatchJob:
    """One run over one batch's remaining lines, then its output files."""

    def __init__(self, runner: BatchRunner, batch: BatchRecord) -> None:
        self.runner = runner
        self.batch = batch
        self.store = runner.store
        self.config = runner.config
        self.stop_as: str | None = None  # "cancelled" | "expired" | "lost" (the lease): take no more lines
        self.provider_expired = False  # a provider's batch expired before answering some line

    async def run(self) -> None:
        if self.batch.status == "cancelling":
            await self._answered_at_providers()
            return await self.finalize("cancelled")
        if self.batch.status == "in_progress":
            left = await self._left()
            if left is None:
                return
            direct = [line for line in left if self._at_provider(line)]
            todo = deque(line for line in left if not self._at_provider(line))
            await self._leased(*(self._work(todo) for _ in range(self.config.concurrency)), *map(self._one, direct))
            if self.runner.stopping:
                return  # shutting down: the next start (or another replica) goes on from here
            if self.stop_as is None:
                await self.store.set_status(self.batch.id, "finalizing", only_from=("in_progress",))
        await self.finalize(self.stop_as or ("expired" if self.provider_expired else "completed"))

    async def _left(self) -> list[BatchLine] | None:
        """The input's lines that have no result yet; None when the input file is gone."""
        lines = await self._lines()
        if lines is None:
            return None
        done = await self.store.done_lines(self.batch.id)
        return [line for line in lines if line.line not in done]

    def _at_provider(self, line: BatchLine) -> bool:
        """The line runs in its provider's own batch (gateway/providers/batch_api.py)."""
        return line.body.get("model") in self.runner.at_provider

    async def _leased(self, *work: Awaitable[None]) -> None:
        """Run `work` while this replica keeps the batch's lease."""
        keeper = asyncio.create_task(self._keep_lease())
        try:
            await asyncio.gather(*work)
        finally:
            keeper.cancel()

    async def _lines(self) -> list[BatchLine] | None:
        path = self.runner.files.path(self.batch.input_file_id)
        try:
            data = await asyncio.to_thread(path.read_bytes)
        except FileNotFoundError:
            errors = [
                {
                    "code": "missing_input_file",
                    "message": "the input file is gone",
                    "line": None,
                    "param": "input_file_id",
                }
            ]
            await self.store.set_status(self.batch.id, "failed", errors=orjson.dumps(errors).decode())
            return None
        lines, _ = await asyncio.to_thread(parse_input, data, self.batch.endpoint, self.config.max_lines)
        return lines

    async def _keep_lease(self) -> None:
        """Renew the lease; notice a cancel or the end of the completion window."""
        while True:
            await asyncio.sleep(min(self.config.lease_s / 3, self.config.poll_interval_s))
            try:
                renewed = await self.store.renew(self.batch.id, self.runner.owner, self.config.lease_s)
                status = (await self.store.get(self.batch.id)).status
            except SQLAlchemyError as err:
                log.warning("batch %s: lease renewal failed, will retry: %s", self.batch.id, err)
                continue
            if not renewed:
                self.stop_as = self.stop_as or "lost"
                return
            if self.stop_as is None and status == "cancelling":
                self.stop_as = "cancelled"
                await self._stop_at_providers()
            elif self.stop_as is None and time.time() >= self.batch.expires_at:
                self.stop_as = "expired"
                await self._stop_at_providers()

    async def _answered_at_providers(self) -> None:
        """Cancelled while no gateway ran it: the lines a previous run left at a provider are
        cancelled there, and what the provider answered by then is charged and kept."""
        if not self.runner.batchers:
            return
        left = await self._left()
        if left is None:
            return
        self.stop_as = "cancelled"
        await self._stop_at_providers()
        await self._leased(*(self._one(line) for line in left if self._at_provider(line)))

    async def _stop_at_providers(self) -> None:
        """The lines at a provider end with its batch: cancel it there (what it answered by then
        still comes back and is charged; the rest is released unbilled)."""
        for batcher in self.runner.batchers:
            await batcher.cancel(self.batch.id)

    async def _work(self, todo: deque[BatchLine]) -> None:
        while todo and self.stop_as is None and not self.runner.stopping:
            await self._one(todo.popleft())

    async def _one(self, line: BatchLine) -> None:
        row = await self._run_line(line)
        if row is not None and not row.ok and '"batch_expired"' in row.body:
            self.provider_expired = True  # the caller's batch ends `expired`, as the provider's did
        if row is not None and await self.store.add_result(self.batch.id, row):
            self.runner.lines.labels("ok" if row.ok else "failed").inc()

    async def _run_line(self, line: BatchLine) -> ResultRow | None:
        """The line's answer; transient failures (429, 5xx) are tried again, and a busy batch
        lane is waited out for as long as the batch runs. None when the batch stopped first."""
        failures = tries = 0
        while True:
            row = await self._answer(line)
            failures = failures_after(row, failures)
            if row.status_code not in TRANSIENT or failures >= self.config.max_attempts:
                return row
            if self.stop_as is not None or self.runner.stopping:
                return None
            tries += 1
            await asyncio.sleep(retry_delay_s(tries))

    async def _answer(self, line: BatchLine) -> ResultRow:
        request_id = "req_" + secrets.token_hex(12)
        endpoint = ENDPOINTS[self.batch.endpoint]
        body = {k: v for k, v in line.body.items() if k not in ("stream", "stream_options")}
        try:  # the body is checked by the pipeline, like a request's (stages/check_body.py)
            principal = await self.runner.keys.principal_for_id(self.batch.key_id)
        except GatewayError as err:
            return ResultRow(line.line, line.custom_id, request_id, err.status, error_body(err).decode())
        headers = {"x-costgate-priority": "batch", "x-costgate-tags": LANE_TAG, "x-costgate-trace-id": self.batch.id}
        ctx = RequestContext(
            request_id=request_id,
            endpoint=endpoint,
            body=body,
            api_key=None,
            headers=headers,
            principal=principal,
            decided=Decisions(price_factor=self.runner.price_factor),
            batch_line=BatchLineRef(self.batch.id, line.custom_id, self._at_provider(line)),
        )
        try:
            response = await self.runner.handle(ctx)
        except Exception:
            log.exception("batch %s line %d: the pipeline raised", self.batch.id, line.line)
            bug = GatewayError("internal error in the gateway")
            return ResultRow(line.line, line.custom_id, request_id, bug.status, error_body(bug).decode())
        raw = await _body_of(response)
        u = ctx.meter.usage
        return ResultRow(
            line.line,
            line.custom_id,
            request_id,
            response.status_code,
            raw.decode(),
            u.prompt_tokens,
            u.completion_tokens,
            u.cached_tokens,
            to_pico(ctx.meter.cost),
        )

    async def finalize(self, final: str) -> None:
        """Write the output and error files (idempotent: their ids derive from the batch's),
        then move the batch to its final status."""
        if final == "lost":
            return  # another replica holds the batch now
        results = await self.store.results(self.batch.id)
        suffix = self.batch.id.removeprefix("batch_")
        output = await self._write(f"file-{suffix}-output", [r for r in results if r.ok])
        errors = await self._write(f"file-{suffix}-errors", [r for r in results if not r.ok])
        await self.store.set_status(
            self.batch.id,
            final,
            only_from=("in_progress", "finalizing", "cancelling"),
            output_file_id=output,
            error_file_id=errors,
        )
        await self.runner.provider_batches.done(self.batch.id)

    async def _write(self, file_id: str, rows: list[ResultRow]) -> str | None:
        if not rows:
            return None
        files = self.runner.files
        try:
            await files.get(file_id, self.batch.team_id)
            return file_id  # written by an earlier run that stopped before the status changed
        except GatewayError:
            pass

        async def chunks() -> Any:
            for row in rows:
                yield output_line(row)

        name = f"{self.batch.id}_{'output' if file_id.endswith('output') else 'error'}.jsonl"
        await files.save(
            chunks(),
            team_id=self.batch.team_id,
            key_id=self.batch.key_id,
            filename=name,
            purpose="batch_output",
            limit=1 << 62,
            file_id=file_id,
        )
        return file_id
