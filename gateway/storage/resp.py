"""A pipelined Redis connection for the two scripts on every request's path (admit, settle).

redis-py's asyncio client spends more CPU per command (pool checkout, retry wrappers, parser
layers) than the whole Lua script costs Redis. This is the minimum instead: one connection per
process, commands written as they come, replies (parsed by hiredis) matched to waiters in order
— which also pipelines concurrent requests onto one socket for free. A reply that does not come
within the timeout, or a lost connection, fails every waiter on that connection (their order
is no longer known) and the next call reconnects.

Errors: `ConnectionError` / `TimeoutError` (both OSError) when Redis cannot be reached in time;
`redis.exceptions.ResponseError` for an error reply (after retrying NOSCRIPT with EVAL once).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import deque
from dataclasses import dataclass, field
from urllib.parse import unquote, urlparse

import hiredis
from redis.exceptions import ResponseError

Arg = bytes | str | int | float


@dataclass(frozen=True, slots=True)
class Script:
    source: bytes
    sha: bytes = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sha", hashlib.sha1(self.source).hexdigest().encode())


def encode(args: tuple[Arg, ...]) -> bytes:
    parts = [b"*%d\r\n" % len(args)]
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(b), b))
    return b"".join(parts)


class _Protocol(asyncio.Protocol):
    def __init__(self) -> None:
        self.reader = hiredis.Reader(replyError=ResponseError)
        self.waiters: deque[asyncio.Future[object]] = deque()
        self.transport: asyncio.Transport | None = None
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        while (reply := self.reader.gets()) is not False:
            waiter = self.waiters.popleft()
            if not waiter.done():
                waiter.set_result(reply)

    def connection_lost(self, exc: Exception | None) -> None:
        self.fail(ConnectionError(f"redis connection lost: {exc}"))

    def fail(self, err: Exception) -> None:
        self.closed = True
        while self.waiters:
            waiter = self.waiters.popleft()
            if not waiter.done():
                waiter.set_exception(err)
        if self.transport is not None:
            self.transport.abort()


class ScriptChannel:
    def __init__(self, url: str, timeout_s: float) -> None:
        parsed = urlparse(url)
        self.host = parsed.hostname or "127.0.0.1"
        self.port = parsed.port or 6379
        self.db = int(parsed.path.strip("/") or 0)
        self.password = unquote(parsed.password) if parsed.password else None
        self.username = unquote(parsed.username) if parsed.username else None
        self.timeout_s = timeout_s
        self._protocol: _Protocol | None = None
        self._lock = asyncio.Lock()

    async def _connected(self) -> _Protocol:
        protocol = self._protocol
        if protocol is not None and not protocol.closed:
            return protocol
        async with self._lock:
            if self._protocol is None or self._protocol.closed:
                loop = asyncio.get_running_loop()
                _transport, fresh = await asyncio.wait_for(
                    loop.create_connection(_Protocol, self.host, self.port), self.timeout_s
                )
                setup: list[tuple[Arg, ...]] = []
                if self.password is not None:
                    setup.append(("AUTH", self.username, self.password) if self.username else ("AUTH", self.password))
                if self.db:
                    setup.append(("SELECT", self.db))
                for command in setup:
                    reply = await self._send(fresh, command)
                    if isinstance(reply, ResponseError):
                        fresh.fail(ConnectionError(f"redis refused {command[0]!r}: {reply}"))
                        raise reply
                self._protocol = fresh
            assert self._protocol is not None
            return self._protocol

    async def _send(self, protocol: _Protocol, args: tuple[Arg, ...]) -> object:
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[object] = loop.create_future()
        protocol.waiters.append(waiter)
        assert protocol.transport is not None
        protocol.transport.write(encode(args))
        timer = loop.call_later(self.timeout_s, _expire, protocol, waiter)
        try:
            return await waiter
        finally:
            timer.cancel()

    async def call(self, *args: Arg) -> object:
        return await self._send(await self._connected(), args)

    async def run(self, script: Script, keys: list[str], args: list[Arg]) -> object:
        reply = await self.call(b"EVALSHA", script.sha, len(keys), *keys, *args)
        if isinstance(reply, ResponseError) and str(reply).startswith("NOSCRIPT"):
            reply = await self.call(b"EVAL", script.source, len(keys), *keys, *args)  # caches it too
        if isinstance(reply, ResponseError):
            raise reply
        return reply

    async def close(self) -> None:
        if self._protocol is not None and self._protocol.transport is not None:
            self._protocol.transport.close()
            self._protocol.closed = True


def _expire(protocol: _Protocol, waiter: asyncio.Future[object]) -> None:
    if not waiter.done():
        protocol.fail(TimeoutError("no reply from redis in time"))
