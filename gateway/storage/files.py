"""Uploaded files (`/v1/files`): a row per file, the bytes under `<data_dir>/files/`.

A file belongs to the team whose key uploaded it; no other team can see it. Bytes are written
to a temporary name and renamed into place before the row is inserted, so a row always points
at a complete file. (Several gateway replicas need `data_dir` on a shared volume.)
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import BigInteger, Column, Float, Index, String, Table, delete, insert, select
from sqlalchemy.ext.asyncio import AsyncEngine

from gateway.core.errors import BodyTooLarge, NotFound
from gateway.storage.db import metadata
from gateway.storage.private import private_dir

files = Table(
    "files",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("team_id", String(40), nullable=False),
    Column("key_id", String(40)),
    Column("filename", String(500), nullable=False),
    Column("purpose", String(32), nullable=False),
    Column("bytes", BigInteger, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("expires_at", Float),
    Index("ix_files_team_created", "team_id", "created_at"),
)

CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class FileRecord:
    id: str
    team_id: str
    filename: str
    purpose: str
    bytes: int
    created_at: float
    expires_at: float | None = None

    def to_openai(self) -> dict:
        return {
            "id": self.id,
            "object": "file",
            "bytes": self.bytes,
            "created_at": int(self.created_at),
            "filename": self.filename,
            "purpose": self.purpose,
            "status": "processed",
            "expires_at": None if self.expires_at is None else int(self.expires_at),
            "status_details": None,
        }


def new_file_id() -> str:
    return "file-" + secrets.token_hex(12)


class FileStore:
    def __init__(self, engine: AsyncEngine, data_dir: str | Path) -> None:
        self._engine = engine
        self.root = Path(data_dir) / "files"

    def path(self, file_id: str) -> Path:
        return self.root / file_id

    async def save(
        self,
        chunks: AsyncIterator[bytes],
        *,
        team_id: str,
        key_id: str | None,
        filename: str,
        purpose: str,
        limit: int,
        file_id: str | None = None,
        expires_at: float | None = None,
    ) -> FileRecord:
        """Write the bytes, then the row. Over `limit` bytes: nothing is kept."""
        file_id = file_id or new_file_id()
        private_dir(self.root)
        tmp = self.root / f".{file_id}.{secrets.token_hex(4)}.part"
        size = 0
        try:
            with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as out:
                async for chunk in chunks:
                    size += len(chunk)
                    if size > limit:
                        raise BodyTooLarge(f"the file is larger than {limit} bytes", param="file")
                    out.write(chunk)
            os.replace(tmp, self.path(file_id))
        finally:
            tmp.unlink(missing_ok=True)
        record = FileRecord(file_id, team_id, filename, purpose, size, time.time(), expires_at)
        async with self._engine.begin() as conn:
            await conn.execute(
                insert(files).values(
                    id=record.id,
                    team_id=team_id,
                    key_id=key_id,
                    filename=filename,
                    purpose=purpose,
                    bytes=size,
                    created_at=record.created_at,
                    expires_at=expires_at,
                )
            )
        return record

    async def get(self, file_id: str, team_id: str) -> FileRecord:
        async with self._engine.connect() as conn:
            row = (await conn.execute(select(files).where(files.c.id == file_id, files.c.team_id == team_id))).first()
        if row is None:
            raise NotFound(f"no file {file_id!r}", code="file_not_found", param="file_id")
        return _record(row)

    async def list(
        self,
        team_id: str,
        *,
        purpose: str | None = None,
        after: str | None = None,
        limit: int = 100,
        newest_first: bool = True,
    ) -> tuple[list[FileRecord], bool]:
        """A page of the team's files and whether more follow (cursor: the last id seen)."""
        query = select(files).where(files.c.team_id == team_id)
        if purpose:
            query = query.where(files.c.purpose == purpose)
        order = (
            (files.c.created_at.desc(), files.c.id.desc())
            if newest_first
            else (files.c.created_at.asc(), files.c.id.asc())
        )
        async with self._engine.connect() as conn:
            if after:
                cursor = (
                    await conn.execute(
                        select(files.c.created_at, files.c.id).where(files.c.id == after, files.c.team_id == team_id)
                    )
                ).first()
                if cursor is not None:
                    query = query.where(
                        (files.c.created_at < cursor.created_at)
                        | ((files.c.created_at == cursor.created_at) & (files.c.id < cursor.id))
                        if newest_first
                        else (files.c.created_at > cursor.created_at)
                        | ((files.c.created_at == cursor.created_at) & (files.c.id > cursor.id))
                    )
            rows = (await conn.execute(query.order_by(*order).limit(limit + 1))).all()
        return [_record(r) for r in rows[:limit]], len(rows) > limit

    async def delete(self, file_id: str, team_id: str) -> None:
        async with self._engine.begin() as conn:
            result = await conn.execute(delete(files).where(files.c.id == file_id, files.c.team_id == team_id))
        if result.rowcount == 0:
            raise NotFound(f"no file {file_id!r}", code="file_not_found", param="file_id")
        self.path(file_id).unlink(missing_ok=True)

    async def read_chunks(self, file_id: str) -> AsyncIterator[bytes]:
        with open(self.path(file_id), "rb") as f:
            while chunk := f.read(CHUNK):
                yield chunk


def _record(row) -> FileRecord:
    return FileRecord(row.id, row.team_id, row.filename, row.purpose, int(row.bytes), row.created_at, row.expires_at)
