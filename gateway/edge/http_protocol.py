"""uvicorn's httptools protocol with a deadline for a request's headers.

uvicorn times only the idle gap between two requests on a keep-alive connection (after a
response); a connection that never sends anything, or sends headers a byte at a time, is kept
forever (3,000 such connections once stayed open for 60 s, against an fd limit of 20,000). Here
every connection must finish a request's headers within `header_timeout_s` of its first byte
— of the connection's start for the first request — or it is closed. The deadline is not moved
by data arriving, so a slow drip cannot extend it. Bodies and answers are timed elsewhere (the
body caps, the upstream timeouts).
"""

from __future__ import annotations

import asyncio
import logging

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

log = logging.getLogger("costgate.http")


class HeaderDeadlineProtocol(HttpToolsProtocol):
    header_timeout_s: float = 10.0  # set on the subclass `with_header_timeout` makes
    _header_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._header_deadline is None:  # a keep-alive connection's next request
            self._arm()

    def on_headers_complete(self) -> None:
        self._disarm()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._header_deadline = self.loop.call_later(self.header_timeout_s, self._headers_too_slow)

    def _disarm(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _headers_too_slow(self) -> None:
        self._header_deadline = None
        if not self.transport.is_closing():
            log.debug("closing %s: no complete request headers within %s s", self.client, self.header_timeout_s)
            self.transport.close()


def with_header_timeout(timeout_s: float) -> type[HeaderDeadlineProtocol]:
    """The protocol class for `uvicorn.run(http=...)`, closing connections after `timeout_s`."""
    return type("HeaderDeadlineProtocol", (HeaderDeadlineProtocol,), {"header_timeout_s": timeout_s})
