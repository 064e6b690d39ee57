"""The operating-system side of one vLLM server (engine/launcher.py supervises it): a free
loopback port, the process started in a session of its own that dies with the gateway, its
output appended to a log file, and the whole process group ended on stop."""

from __future__ import annotations

import asyncio
import ctypes
import os
import signal
import socket
from pathlib import Path

STOP_GRACE_S = 30.0  # SIGTERM, then this long before SIGKILL


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:
    """Run in the child before exec: SIGTERM it when the gateway process dies, so a killed
    gateway leaves no orphaned engine holding memory (Linux PR_SET_PDEATHSIG)."""
    os.setsid()
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)
    except OSError:
        pass  # not Linux: the idle shutdown and aclose still stop it


async def spawn(cmd: list[str], env: dict[str, str], log_path: Path) -> asyncio.subprocess.Process:
    """`cmd` started with its stdout and stderr appended to `log_path`."""
    with open(log_path, "ab") as out:
        return await asyncio.create_subprocess_exec(
            *cmd,
            stdout=out,
            stderr=asyncio.subprocess.STDOUT,
            stdin=asyncio.subprocess.DEVNULL,
            env=env,
            preexec_fn=_die_with_parent,
        )


async def terminate(proc: asyncio.subprocess.Process) -> None:
    """End the server and any worker it spawned (its process group): SIGTERM, SIGKILL after
    `STOP_GRACE_S`. A process that already ended is left alone."""
    if proc.returncode is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        await asyncio.wait_for(proc.wait(), STOP_GRACE_S)
    except (ProcessLookupError, TimeoutError):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        await proc.wait()
