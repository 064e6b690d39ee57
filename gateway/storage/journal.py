"""The ledger's write-ahead journal: rows reach a local file before the client gets its answer.

Each row is appended (one `write` of a JSON line, no fsync) to the current segment file. The
kernel holds written data even if the process is SIGKILLed, so a row is safe once `append`
returns; only a power loss of the host can still lose the last rows (fsync per request would
cost more than the whole request path). The ledger writer seals the segment before each
database flush and deletes sealed segments once their rows are committed. A process holds an
exclusive flock on every segment it has not deleted, so on start-up `orphans()` finds exactly
the segments of processes that died, which `LedgerWriter.recover` replays (insert-or-ignore
on the request id: replaying twice is harmless). The same files, of another `kind`, journal
the progress of streams in flight (gateway/upstream/inflight.py).
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path
from typing import Any

import orjson


class Journal:
    def __init__(self, directory: Path, kind: str = "ledger") -> None:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.directory = directory
        self.kind = kind
        self._sealed: list[tuple[Path, int]] = []
        self._path, self._fd = self._open_segment()
        self.written = 0  # bytes in the current segment

    def _open_segment(self) -> tuple[Path, int]:
        path = self.directory / f"{self.kind}-{os.getpid()}-{time.time_ns()}.jsonl"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return path, fd

    def append(self, row: dict[str, Any]) -> None:
        self.written += os.write(self._fd, orjson.dumps(row) + b"\n")

    def seal(self) -> None:
        """Start a new segment; rows appended so far stay in the sealed one until `release`."""
        self._sealed.append((self._path, self._fd))
        self._path, self._fd = self._open_segment()
        self.written = 0

    def release_sealed(self) -> None:
        """The sealed segments' rows are in the database: delete them."""
        for path, fd in self._sealed:
            path.unlink(missing_ok=True)
            os.close(fd)
        self._sealed.clear()

    def orphans(self) -> list[Path]:
        """Segments no living process holds: left by a process that died before flushing."""
        found = []
        for path in sorted(self.directory.glob(f"{self.kind}-*.jsonl")):
            fd = os.open(path, os.O_RDONLY)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                found.append(path)
            except BlockingIOError:
                pass  # held: ours, or a live sibling process's
            finally:
                os.close(fd)
        return found

    @staticmethod
    def read(path: Path) -> list[dict[str, Any]]:
        rows = []
        for line in path.read_bytes().splitlines():
            try:
                rows.append(orjson.loads(line))
            except orjson.JSONDecodeError:
                continue  # a line torn by the crash: its answer never completed
        return rows

    def close(self, delete: bool) -> None:
        """Close every segment; `delete` them once every row is in the database, else leave
        them (unlocked) for the next start's recovery."""
        if delete:
            self.release_sealed()
            self._path.unlink(missing_ok=True)
        for _path, fd in self._sealed:
            os.close(fd)
        self._sealed.clear()
        os.close(self._fd)
