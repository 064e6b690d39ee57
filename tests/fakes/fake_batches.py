"""OpenAI's Batch API for the fake upstream (tests/fakes/fake_openai.py): `/v1/files` (upload,
content) and `/v1/batches` (create with metadata, list newest first with `limit` and `after`,
retrieve, cancel), billing each answered line at the batch
price and keeping its own bill.

A batch is `in_progress` until it ends: by itself `complete_after_s` after it was created (None:
only on demand), or on demand through `POST /_batches/{id}/complete`, `/expire?answered=N` (the
first N lines answered, the rest not: OpenAI writes them nowhere) — and `cancel` ends it with no
line answered. Answers are the fake's echo: "echo: <last user text>", usage in words; a line for
model `reject` is a 400 in the error file (not billed).

`GET /_bill` says what the fake billed: `{"usd": "<decimal>", "lines": N, "lines_submitted": L, "batches_created": M,
"batch_ids": [...]}`.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response


@dataclass(slots=True)
class FakeBatch:
    id: str
    input_file_id: str
    endpoint: str
    created_at: float
    metadata: dict[str, str] | None = None
    status: str = "in_progress"
    output_file_id: str | None = None
    error_file_id: str | None = None
    counts: dict[str, int] = field(default_factory=lambda: {"total": 0, "completed": 0, "failed": 0})


def _json(data: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(data), status_code=status, media_type="application/json")


class FakeBatchApi:
    def __init__(
        self,
        batch_prices: dict[str, tuple[Decimal, Decimal]],
        answer: Callable[[dict[str, Any]], tuple[str, dict[str, int]]],
        complete_after_s: float | None = 0.3,
    ) -> None:
        self.prices = batch_prices  # upstream model -> (input, output) dollars per token at batch price
        self.answer = answer  # a line's body -> its text and usage
        self.complete_after_s = complete_after_s
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, FakeBatch] = {}
        self.billed = Decimal(0)
        self.lines_billed = 0

    async def upload(self, request: Request) -> Response:
        form = await request.form()
        upload = form.get("file")
        if form.get("purpose") != "batch" or upload is None or isinstance(upload, str):
            return _json({"error": {"message": "file and purpose=batch needed", "type": "invalid_request_error"}}, 400)
        file_id = "file-" + secrets.token_hex(8)
        self.files[file_id] = await upload.read()
        return _json({"id": file_id, "object": "file", "bytes": len(self.files[file_id]), "purpose": "batch"})

    async def content(self, request: Request) -> Response:
        data = self.files.get(request.path_params["file_id"])
        return Response(data, media_type="application/octet-stream") if data is not None else _json({}, 404)

    async def create(self, request: Request) -> Response:
        body = orjson.loads(await request.body())
        if body.get("input_file_id") not in self.files:
            return _json({"error": {"message": "no such file", "type": "invalid_request_error"}}, 400)
        batch_id = "batch_fake_" + secrets.token_hex(8)
        batch = FakeBatch(batch_id, body["input_file_id"], body["endpoint"], time.time(), body.get("metadata"))
        batch.counts["total"] = len(self._lines(batch))
        self.batches[batch.id] = batch
        return _json(self._object(batch))

    async def list_batches(self, request: Request) -> Response:
        """Newest first, as OpenAI lists them: `limit` a page, `after` the last id of the page before."""
        newest = list(reversed(self.batches.values()))
        after = request.query_params.get("after")
        if after is not None:
            newest = newest[[b.id for b in newest].index(after) + 1 :]
        limit = int(request.query_params.get("limit", 20))
        page = [self._object(b) for b in newest[:limit]]
        return _json({"object": "list", "data": page, "has_more": len(newest) > limit})

    async def retrieve(self, request: Request) -> Response:
        batch = self.batches.get(request.path_params["batch_id"])
        if batch is None:
            return _json({"error": {"message": "no such batch", "type": "invalid_request_error"}}, 404)
        due = self.complete_after_s is not None and time.time() - batch.created_at >= self.complete_after_s
        if batch.status == "in_progress" and due:
            self._end(batch, "completed", len(self._lines(batch)))
        return _json(self._object(batch))

    async def cancel(self, request: Request) -> Response:
        batch = self.batches.get(request.path_params["batch_id"])
        if batch is None:
            return _json({}, 404)
        if batch.status == "in_progress":
            self._end(batch, "cancelled", 0)
        return _json(self._object(batch))

    async def finish(self, request: Request) -> Response:
        """`/_batches/{id}/complete` or `/expire?answered=N`: end a batch now."""
        batch = self.batches[request.path_params["batch_id"]]
        if batch.status != "in_progress":
            pass  # already ended (cancelled, expired): as it was
        elif request.path_params["how"] == "complete":
            self._end(batch, "completed", len(self._lines(batch)))
        else:
            self._end(batch, "expired", int(request.query_params.get("answered", 0)))
        return _json(self._object(batch))

    async def bill(self, _request: Request) -> Response:
        return _json(
            {
                "usd": str(self.billed),
                "lines": self.lines_billed,
                "lines_submitted": sum(len(self._lines(b)) for b in self.batches.values()),
                "batches_created": len(self.batches),
                "batch_ids": list(self.batches),
            }
        )

    def _lines(self, batch: FakeBatch) -> list[dict[str, Any]]:
        return [orjson.loads(raw) for raw in self.files[batch.input_file_id].splitlines() if raw.strip()]

    def _end(self, batch: FakeBatch, status: str, answered: int) -> None:
        out, errors = [], []
        for line in self._lines(batch)[:answered]:
            body = line["body"]
            item: dict[str, Any] = {"id": "batch_req_" + secrets.token_hex(6), "custom_id": line["custom_id"]}
            if body.get("model") == "reject":
                error = {"error": {"message": "fake: this request is invalid", "type": "invalid_request_error"}}
                errors.append({**item, "response": {"status_code": 400, "body": error}, "error": None})
                continue
            text, usage = self.answer(body)
            price_in, price_out = self.prices[body["model"]]
            self.billed += usage["prompt_tokens"] * price_in + usage["completion_tokens"] * price_out
            self.lines_billed += 1
            answer = {
                "id": "chatcmpl-" + secrets.token_hex(6),
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body["model"],
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": usage,
            }
            out.append({**item, "response": {"status_code": 200, "body": answer}, "error": None})
        batch.output_file_id = self._save(out)
        batch.error_file_id = self._save(errors)
        batch.counts.update(completed=len(out), failed=len(errors))
        batch.status = status

    def _save(self, items: list[dict[str, Any]]) -> str | None:
        if not items:
            return None
        file_id = "file-" + secrets.token_hex(8)
        self.files[file_id] = b"".join(orjson.dumps(i) + b"\n" for i in items)
        return file_id

    def _object(self, batch: FakeBatch) -> dict[str, Any]:
        return {
            "id": batch.id,
            "object": "batch",
            "endpoint": batch.endpoint,
            "input_file_id": batch.input_file_id,
            "completion_window": "24h",
            "status": batch.status,
            "output_file_id": batch.output_file_id,
            "error_file_id": batch.error_file_id,
            "created_at": int(batch.created_at),
            "request_counts": batch.counts,
            "metadata": batch.metadata,
        }
