"""The data dir and the files in it are the gateway's alone: the ledger database, the journal,
uploaded batch files and their answers, cache snapshots and the generated admin key hold other
teams' prompts and spend. Directories are created 0700 and files 0600, whatever the umask;
ones that exist are tightened when this process owns them (a volume mounted by another user
is left as it is, with a warning)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

log = logging.getLogger("costgate.storage")


def private_dir(path: str | Path) -> Path:
    path = Path(path)
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    _tighten(path, 0o700)
    return path


def private_file(path: str | Path) -> Path:
    """Create `path` empty (0600) if it does not exist; else tighten it."""
    path = Path(path)
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        _tighten(path, 0o600)
    return path


def _tighten(path: Path, mode: int) -> None:
    status = path.stat()
    if status.st_mode & 0o777 == mode:
        return
    if status.st_uid != os.geteuid():
        log.warning("%s is readable by others and not ours to change (mode %o)", path, status.st_mode & 0o777)
        return
    os.chmod(path, mode)
