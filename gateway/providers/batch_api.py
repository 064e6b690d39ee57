"""A provider's own Batch API (OpenAI's /v1/files + /v1/batches, issue 26): the batch lane's lines
for a model whose upstream sells batch processing run there, at its batch price.

Each line of a caller's batch arrives on its own (`answer`, awaited by the line's pipeline run,
which holds the line's budget and charges it when the answer comes). Lines of one caller's batch
are gathered for `gather_s`, then uploaded as one provider batch (split at the provider's limits:
`MAX_LINES` lines, `MAX_BYTES` bytes), which is polled until it ends; its output and error files
are mapped back by `custom_id`. A provider batch is recorded (gateway/storage/provider_batches.py)
before the provider is asked to create it, with a token of the gateway's own that the batch
carries as metadata (`costgate_submission`), and its id once the provider accepted it, before it
is polled. So after a restart a line that is already at the provider waits for that batch instead
of being submitted again, even when the gateway stopped between the provider's accepting the
batch and the write of its id: the token is looked up in the provider's list of batches. A line
the provider never answered (the batch expired, was cancelled or failed) raises
`ProviderBatchEnded`: nothing was billed, nothing is charged.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from dataclasses import dataclass, field, replace
from typing import Any

import httpx
import orjson

from gateway.core.context import BatchLineRef
from gateway.core.errors import ProviderBatchEnded, UpstreamError
from gateway.storage.provider_batches import ProviderBatchRecord, ProviderBatchStore

log = logging.getLogger("costgate.batch_api")

MAX_LINES = 50_000  # OpenAI's limits on one batch's input file
MAX_BYTES = 200 * 1024 * 1024
ENDED = ("completed", "failed", "expired", "cancelled")
SUBMISSION = "costgate_submission"  # the metadata key of a provider batch's token
LOOKBACK_S = 600.0  # how far before its row a batch is looked for in the provider's list (clock skew)
LOOKUPS = 10  # tries at that list after a create that failed without the provider's refusal


@dataclass(frozen=True, slots=True)
class LineAnswer:
    """What the provider answered one line: its HTTP status and body."""

    status_code: int
    body: dict[str, Any]


@dataclass(slots=True)
class _Pending:
    """Lines of one caller's batch waiting to be uploaded."""

    lines: list[tuple[str, bytes]] = field(default_factory=list)  # (custom_id, its JSONL line)
    size: int = 0
    flush: asyncio.TimerHandle | None = None


class ProviderBatcher:
    """One deployment's provider batches. Built by gateway/service.py for each model whose
    config resolves `batch_api` on."""

    def __init__(
        self,
        model: str,
        api_base: str,
        api_key: str | None,
        store: ProviderBatchStore,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        poll_s: float = 5.0,
        gather_s: float = 0.5,
    ) -> None:
        self.model = model
        self.store = store
        self.poll_s = poll_s
        self.gather_s = gather_s
        headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.AsyncClient(
            base_url=api_base.rstrip("/"), headers=headers, transport=transport, timeout=60.0
        )
        self._waiting: dict[tuple[str, str], asyncio.Future[LineAnswer]] = {}
        self._pending: dict[str, _Pending] = {}
        self._loaded: set[str] = set()  # callers' batches whose stored provider batches are polled again
        self._loading = asyncio.Lock()
        self._live: dict[str, str] = {}  # provider batch id -> caller's batch id, while polled
        self._stopped: set[str] = set()  # callers' batches cancelled or expired: no new provider batch
        self._tasks: set[asyncio.Task[None]] = set()

    async def answer(self, line: BatchLineRef, url: str, body: dict[str, Any]) -> LineAnswer:
        """The provider's answer to one line (`url`: the provider's path, e.g. /v1/chat/completions)."""
        key = (line.batch_id, line.custom_id)
        await self._resume(line.batch_id)
        # A future already done is an answer that came before its line asked (a provider batch a
        # previous run submitted, collected at this start): it is the line's answer. Only a line
        # with no future at all is submitted; a consumed answer's future is dropped below.
        future = self._waiting.get(key)
        if future is None:
            future = self._waiting[key] = _new_future()
            self._queue(line, orjson.dumps({"custom_id": line.custom_id, "method": "POST", "url": url, "body": body}))
        try:
            return await asyncio.shield(future)
        finally:
            if future.done():
                self._waiting.pop(key, None)

    async def cancel(self, batch_id: str) -> None:
        """The caller's batch was cancelled or expired: cancel its provider batches; their
        answered lines still come back (and are charged), the rest end as `ProviderBatchEnded`.
        Also after a restart: the provider batches a previous run submitted are cancelled too."""
        self._stopped.add(batch_id)
        await self._resume(batch_id)
        pending = self._pending.pop(batch_id, None)
        if pending is not None:
            if pending.flush is not None:
                pending.flush.cancel()
            for custom_id, _ in pending.lines:
                self._end(batch_id, custom_id, "cancelled")
        for provider_id, owner in list(self._live.items()):
            if owner == batch_id:
                try:
                    await self._client.post(f"/batches/{provider_id}/cancel")
                except httpx.HTTPError as err:
                    log.warning("could not cancel provider batch %s: %s", provider_id, err)

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._client.aclose()

    # submitting

    def _queue(self, line: BatchLineRef, jsonl: bytes) -> None:
        if line.batch_id in self._stopped:
            return self._end(line.batch_id, line.custom_id, "cancelled")
        pending = self._pending.setdefault(line.batch_id, _Pending())
        if pending.lines and (len(pending.lines) >= MAX_LINES or pending.size + len(jsonl) + 1 > MAX_BYTES):
            self._flush(line.batch_id)
            pending = self._pending.setdefault(line.batch_id, _Pending())
        pending.lines.append((line.custom_id, jsonl))
        pending.size += len(jsonl) + 1
        if pending.flush is not None:
            pending.flush.cancel()
        pending.flush = asyncio.get_running_loop().call_later(self.gather_s, self._flush, line.batch_id)

    def _flush(self, batch_id: str) -> None:
        pending = self._pending.pop(batch_id, None)
        if pending is None or not pending.lines:
            return
        if pending.flush is not None:
            pending.flush.cancel()
        self._spawn(self._submit(batch_id, pending.lines))

    def _spawn(self, work: Any) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _submit(self, batch_id: str, lines: list[tuple[str, bytes]]) -> None:
        token = secrets.token_hex(12)
        record = await self.store.intend(token, batch_id, self.model, tuple(c for c, _ in lines))
        try:
            provider_id: str | None = await self._create(b"\n".join(j for _, j in lines) + b"\n", lines[0][1], token)
        except (httpx.HTTPError, UpstreamError, ValueError) as err:
            log.warning("%s: could not submit a provider batch: %s", self.model, err)
            provider_id = await self._created_anyway(record)
        if provider_id is None:
            await self.store.forget(token)
            for custom_id in record.custom_ids:
                self._fail(batch_id, custom_id, UpstreamError("the provider refused the batch"))
            return
        await self.store.submitted(token, provider_id)
        await self._poll(replace(record, id=provider_id))

    async def _create(self, content: bytes, first: bytes, token: str) -> str:
        upload = await self._client.post(
            "/files", files={"file": ("batch.jsonl", content, "application/jsonl")}, data={"purpose": "batch"}
        )
        _check(upload)
        endpoint = orjson.loads(first)["url"]
        created = await self._client.post(
            "/batches",
            json={
                "input_file_id": upload.json()["id"],
                "endpoint": endpoint,
                "completion_window": "24h",
                "metadata": {SUBMISSION: token},
            },
        )
        _check(created)
        return str(created.json()["id"])

    async def _created_anyway(self, record: ProviderBatchRecord) -> str | None:
        """A create that failed without the provider's refusal (a timeout, a dropped connection)
        may have been accepted: the batch is looked for before its lines are failed, again every
        `poll_s` while the provider cannot say (at most LOOKUPS times: a batch it made and the
        gateway failed would be billed and never charged)."""
        for attempt in range(LOOKUPS):
            try:
                return await self._find(record)
            except UpstreamError as err:
                log.warning(
                    "%s: could not look for provider batch %s (try %d): %s", self.model, record.id, attempt + 1, err
                )
                await asyncio.sleep(self.poll_s)
        log.error("%s: the provider never said whether it made batch %s; its lines fail", self.model, record.id)
        return None

    async def _find(self, record: ProviderBatchRecord) -> str | None:
        """The id of the provider batch that carries `record`'s token, or None when the provider
        never created it. Pages through the provider's batches, newest first, back to shortly
        before the record was written. UpstreamError when the provider cannot say."""
        params: dict[str, str | int] = {"limit": 100}
        try:
            while True:
                response = await self._client.get("/batches", params=params)
                _check(response)
                page = response.json()
                batches = page.get("data") or []
                for batch in batches:
                    if (batch.get("metadata") or {}).get(SUBMISSION) == record.token:
                        return str(batch["id"])
                if not page.get("has_more") or not batches:
                    return None
                if float(batches[-1].get("created_at") or 0) < record.created_at - LOOKBACK_S:
                    return None
                params["after"] = str(batches[-1]["id"])
        except (httpx.HTTPError, ValueError) as err:
            raise UpstreamError(f"the provider's Batch API could not list batches: {err}") from err

    # polling

    async def _resume(self, batch_id: str) -> None:
        """Once per caller's batch: poll again the provider batches a previous run submitted."""
        if batch_id in self._loaded:
            return
        async with self._loading:
            if batch_id in self._loaded:
                return
            for record in await self.store.unfinished(batch_id, self.model):
                if record.token is not None:  # stopped before the provider's answer was written
                    found = await self._find(record)  # UpstreamError: not loaded, tried again
                    if found is None:
                        await self.store.forget(record.token)  # its lines are submitted again
                        continue
                    await self.store.submitted(record.token, found)
                    record = replace(record, id=found)
                if record.id in self._live:
                    continue
                for custom_id in record.custom_ids:
                    self._waiting.setdefault((batch_id, custom_id), _new_future())
                self._live[record.id] = batch_id  # before its poll starts: a cancel now reaches it
                self._spawn(self._poll(record))
            self._loaded.add(batch_id)

    async def _poll(self, record: ProviderBatchRecord) -> None:
        self._live[record.id] = record.batch_id
        try:
            while True:
                try:
                    response = await self._client.get(f"/batches/{record.id}")
                    _check(response)
                    batch = response.json()
                    if batch.get("status") in ENDED:
                        await self._collect(record, batch)
                        return
                except (httpx.HTTPError, UpstreamError, ValueError) as err:
                    log.warning("%s: polling provider batch %s failed, will retry: %s", self.model, record.id, err)
                await asyncio.sleep(self.poll_s)
        finally:
            self._live.pop(record.id, None)

    async def _collect(self, record: ProviderBatchRecord, batch: dict[str, Any]) -> None:
        answers: dict[str, LineAnswer] = {}
        for file_field in ("output_file_id", "error_file_id"):
            if batch.get(file_field):
                answers.update(await self._read_file(str(batch[file_field])))
        for custom_id in record.custom_ids:
            found = answers.get(custom_id)
            future = self._waiting.get((record.batch_id, custom_id))
            if future is None or future.done():
                continue
            if found is None:
                self._end(record.batch_id, custom_id, str(batch.get("status")))
            else:
                future.set_result(found)

    async def _read_file(self, file_id: str) -> dict[str, LineAnswer]:
        response = await self._client.get(f"/files/{file_id}/content")
        _check(response)
        answers = {}
        for raw in response.content.splitlines():
            if not raw.strip():
                continue
            item = orjson.loads(raw)
            reply = item.get("response") or {}
            if reply.get("status_code") is not None:
                answers[item["custom_id"]] = LineAnswer(int(reply["status_code"]), reply.get("body") or {})
            else:  # a line the provider could not run at all (OpenAI's `error` member)
                error = item.get("error") or {}
                body = {"error": {"message": error.get("message", "failed"), "code": error.get("code")}}
                answers[item["custom_id"]] = LineAnswer(500, body)
        return answers

    def _end(self, batch_id: str, custom_id: str, status: str) -> None:
        self._fail(batch_id, custom_id, ProviderBatchEnded.of(status))

    def _fail(self, batch_id: str, custom_id: str, error: Exception) -> None:
        future = self._waiting.get((batch_id, custom_id))
        if future is not None and not future.done():
            future.set_exception(error)


def _new_future() -> asyncio.Future[LineAnswer]:
    """A line's answer to come. Nobody may wait for it (the line's result was stored before a
    restart, or its run stopped): its error is marked as seen, so asyncio logs nothing."""
    future: asyncio.Future[LineAnswer] = asyncio.get_running_loop().create_future()
    future.add_done_callback(lambda f: f.cancelled() or f.exception())
    return future


def _check(response: httpx.Response) -> None:
    if response.status_code >= 400:
        raise UpstreamError(f"the provider's Batch API answered {response.status_code}")
