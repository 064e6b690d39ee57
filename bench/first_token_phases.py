"""Where a proxy's first-token time goes, from the kernel's view (issue 28): `perf trace` records
the proxy's read and write syscalls while one round of streams runs, and each stream is cut in
two at them:

    request in -> upstream out    the client's request read, to the upstream request written
    first chunk in -> out         the upstream's first token read, to its bytes written to the client

Only reads and writes are traced (a few a request), so the proxy runs nearly as it does untraced.
The client connection is the one the proxy writes most to, the upstream one the one it reads most
from (one keep-alive connection each, one request at a time); eventfd wake-ups (8 bytes) are left
out. The first token is the first upstream read at least `--token-gap-ms` / 2 after the request
went up (the fake sends its headers at once and a token every interval). Needs perf (Debian's
linux-perf); `bench/overhead.py --stream-only --trace-phases` runs it.
"""

from __future__ import annotations

import re
import statistics
import subprocess
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

SYSCALL = re.compile(r"\s*([\d.]+) \(\s*[\d.]* ms\): \S+ (read|write)\(fd: (\d+).*\)\s+= (\d+)")


@dataclass(frozen=True)
class Phases:
    pre_call_ms: list[float]  # request read -> upstream request written
    first_chunk_ms: list[float]  # first token read -> written to the client


def parse(trace: str, token_gap_ms: float) -> Phases:
    events = [
        (float(m[1]), m[2], int(m[3]), int(m[4]))
        for m in map(SYSCALL.match, trace.splitlines())
        if m is not None and int(m[4]) != 8
    ]
    client = Counter(fd for _, op, fd, _ in events if op == "write").most_common(1)[0][0]
    upstream = Counter(fd for _, op, fd, _ in events if op == "read").most_common(1)[0][0]
    pre, first = [], []
    sent_at: float | None = None
    asked_at: float | None = None
    waiting = False  # an upstream request is out and its first token not yet relayed
    token_at: float | None = None
    for at, op, fd, size in events:
        if op == "read" and fd == client and size > 0:
            asked_at, sent_at, waiting, token_at = at, None, False, None
        elif op == "write" and fd == upstream and asked_at is not None and sent_at is None:
            sent_at, waiting = at, True
            pre.append(at - asked_at)
        elif op == "read" and fd == upstream and waiting and sent_at is not None and token_at is None:
            if at - sent_at >= token_gap_ms / 2:
                token_at = at
        elif op == "write" and fd == client and waiting and token_at is not None:
            first.append(at - token_at)
            waiting = False
    return Phases(pre, first)


class Tracer:
    """`perf trace` on one process, for as long as the `with` block runs."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.out = Path(tempfile.mkdtemp()) / "trace.txt"
        self._process: subprocess.Popen | None = None

    def __enter__(self) -> Tracer:
        self._process = subprocess.Popen(
            ["perf", "trace", "-p", str(self.pid), "-e", "read,write", "-o", str(self.out)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(1.0)  # attached before the first request
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._process is not None
        self._process.terminate()
        self._process.wait(timeout=30)

    def phases(self, token_gap_ms: float) -> Phases:
        return parse(self.out.read_text(), token_gap_ms)


def summary(values: list[float]) -> str:
    if len(values) < 10:
        return f"{len(values)} streams (too few)"
    deciles = statistics.quantiles(values, n=10)
    p50 = statistics.median(values)
    return f"p10 {deciles[0]:.3f} ms  p50 {p50:.3f} ms  p90 {deciles[-1]:.3f} ms  ({len(values)} streams)"
