"""`/v1/files` and `/v1/batches` in OpenAI's shapes. Files and batches belong to the team of
the key that created them; another team's id answers 404. The work itself is done by
gateway.batch.runner, line by line through the pipeline."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from typing import Any, Literal

import orjson
from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.datastructures import UploadFile
from starlette.responses import Response, StreamingResponse

from gateway.batch.input import ENDPOINTS, parse_input
from gateway.batch.runner import BatchRunner
from gateway.core.context import Principal
from gateway.core.errors import InvalidRequest
from gateway.routes.openai import bearer
from gateway.service import gateway_of
from gateway.storage.batches import BatchRecord
from gateway.storage.files import FileRecord
from policies.pricing import format_usd

router = APIRouter(prefix="/v1")

WINDOW = re.compile(r"^([1-9][0-9]{0,3})h$")
PURPOSES = ("batch",)  # what clients may upload; `batch_output` files are written by the gateway


def _json(data: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(data), status_code=status, media_type="application/json")


def _page(items: list[dict[str, Any]], has_more: bool) -> dict[str, Any]:
    return {
        "object": "list",
        "data": items,
        "first_id": items[0]["id"] if items else None,
        "last_id": items[-1]["id"] if items else None,
        "has_more": has_more,
    }


async def _caller(request: Request) -> tuple[BatchRunner, Principal]:
    gateway = gateway_of(request)
    return gateway.batch_lane, await gateway.keys.authenticate(bearer(request))


# files


@router.post("/files")
async def upload_file(request: Request) -> Response:
    lane, principal = await _caller(request)
    limit = lane.config.max_file_bytes  # the whole body is capped a little above (gateway/edge/guard.py)
    try:
        form = await request.form(max_files=1, max_fields=8)
    except (AssertionError, ValueError, KeyError) as err:  # starlette's multipart parser errors
        raise InvalidRequest(f"the upload must be multipart/form-data with 'file' and 'purpose': {err}") from None
    upload, purpose = form.get("file"), form.get("purpose")
    if not isinstance(upload, UploadFile):
        raise InvalidRequest("missing the 'file' part", param="file")
    if purpose not in PURPOSES:
        raise InvalidRequest(f"purpose must be one of {', '.join(PURPOSES)}", param="purpose")

    async def chunks() -> AsyncIterator[bytes]:
        while chunk := await upload.read(1 << 20):
            yield chunk

    record = await lane.files.save(
        chunks(),
        team_id=principal.team_id,
        key_id=principal.key_id,
        filename=(upload.filename or "upload.jsonl")[:500],
        purpose=purpose,
        limit=limit,
    )
    await form.close()
    return _json(record.to_openai())


@router.get("/files")
async def list_files(
    request: Request,
    purpose: str | None = None,
    after: str | None = None,
    limit: int = Query(10_000, ge=1, le=10_000),
    order: Literal["asc", "desc"] = "desc",
) -> Response:
    lane, principal = await _caller(request)
    records, more = await lane.files.list(
        principal.team_id, purpose=purpose, after=after, limit=limit, newest_first=order == "desc"
    )
    return _json(_page([r.to_openai() for r in records], more))


@router.get("/files/{file_id}")
async def get_file(request: Request, file_id: str) -> Response:
    lane, principal = await _caller(request)
    return _json((await lane.files.get(file_id, principal.team_id)).to_openai())


@router.get("/files/{file_id}/content")
async def file_content(request: Request, file_id: str) -> Response:
    lane, principal = await _caller(request)
    record: FileRecord = await lane.files.get(file_id, principal.team_id)
    return StreamingResponse(
        lane.files.read_chunks(record.id),
        media_type="application/octet-stream",
        headers={"content-length": str(record.bytes)},
    )


@router.delete("/files/{file_id}")
async def delete_file(request: Request, file_id: str) -> Response:
    lane, principal = await _caller(request)
    await lane.files.get(file_id, principal.team_id)
    if await lane.store.uses_file(file_id):
        raise InvalidRequest(
            "an unfinished batch reads this file: cancel it or wait for it to end", code="file_in_use", param="file_id"
        )
    await lane.files.delete(file_id, principal.team_id)
    return _json({"id": file_id, "object": "file", "deleted": True})


# batches


class BatchIn(BaseModel):
    model_config = ConfigDict(extra="ignore")  # e.g. output_expires_after: accepted, not enforced

    input_file_id: str = Field(min_length=1, max_length=64)
    endpoint: str
    completion_window: str = "24h"
    metadata: dict[str, str] | None = Field(default=None, max_length=16)


async def batch_json(lane: BatchRunner, b: BatchRecord) -> dict[str, Any]:
    p = await lane.store.progress(b.id)
    stamp = {k: None if v is None else int(v) for k, v in b.times.items()}
    return {
        "id": b.id,
        "object": "batch",
        "endpoint": b.endpoint,
        "model": None,
        "errors": {"object": "list", "data": b.errors} if b.errors else None,
        "input_file_id": b.input_file_id,
        "completion_window": b.completion_window,
        "status": b.status,
        "output_file_id": b.output_file_id,
        "error_file_id": b.error_file_id,
        "created_at": int(b.created_at),
        "expires_at": int(b.expires_at),
        **stamp,
        "request_counts": {"total": b.total, "completed": p.completed, "failed": p.failed},
        "usage": {
            "input_tokens": p.prompt_tokens,
            "input_tokens_details": {"cached_tokens": p.cached_tokens},
            "output_tokens": p.completion_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": p.prompt_tokens + p.completion_tokens,
        },
        "metadata": b.metadata,
        "cost_usd": format_usd(p.cost_usd),  # costgate's addition: what the batch was charged so far
    }


@router.post("/batches")
async def create_batch(request: Request) -> Response:
    lane, principal = await _caller(request)
    try:
        body = BatchIn.model_validate(orjson.loads(await request.body()))
    except orjson.JSONDecodeError:
        raise InvalidRequest("the request body is not valid JSON") from None
    except ValidationError as err:
        first = err.errors()[0]
        param = ".".join(str(p) for p in first["loc"])
        raise InvalidRequest(f"invalid '{param}': {first['msg']}", param=param) from None
    window = WINDOW.match(body.completion_window)
    if window is None:
        raise InvalidRequest("completion_window must be like '24h'", param="completion_window")
    if body.endpoint not in ENDPOINTS:
        raise InvalidRequest(f"endpoint must be one of {', '.join(ENDPOINTS)}", param="endpoint")
    record = await lane.files.get(body.input_file_id, principal.team_id)
    if record.purpose != "batch":
        raise InvalidRequest("the input file must be uploaded with purpose 'batch'", param="input_file_id")
    data = await asyncio.to_thread(lane.files.path(record.id).read_bytes)
    lines, errors = await asyncio.to_thread(parse_input, data, body.endpoint, lane.config.max_lines)
    batch_id = await lane.store.create(
        team_id=principal.team_id,
        key_id=principal.key_id,
        endpoint=body.endpoint,
        input_file_id=record.id,
        completion_window=body.completion_window,
        window_s=int(window.group(1)) * 3600,
        total=len(lines),
        metadata=body.metadata,
        errors=errors or None,
    )
    lane.wake()
    return _json(await batch_json(lane, await lane.store.get(batch_id)))


@router.get("/batches")
async def list_batches(request: Request, after: str | None = None, limit: int = Query(20, ge=1, le=100)) -> Response:
    lane, principal = await _caller(request)
    records, more = await lane.store.list(principal.team_id, after=after, limit=limit)
    return _json(_page([await batch_json(lane, r) for r in records], more))


@router.get("/batches/{batch_id}")
async def get_batch(request: Request, batch_id: str) -> Response:
    lane, principal = await _caller(request)
    return _json(await batch_json(lane, await lane.store.get(batch_id, principal.team_id)))


@router.post("/batches/{batch_id}/cancel")
async def cancel_batch(request: Request, batch_id: str) -> Response:
    lane, principal = await _caller(request)
    batch = await lane.store.get(batch_id, principal.team_id)
    if batch.status in ("completed", "failed", "expired"):
        raise InvalidRequest(f"a {batch.status} batch cannot be cancelled", code="batch_not_cancellable")
    await lane.store.set_status(batch_id, "cancelling", only_from=("validating", "in_progress"))
    lane.wake()
    return _json(await batch_json(lane, await lane.store.get(batch_id, principal.team_id)))
