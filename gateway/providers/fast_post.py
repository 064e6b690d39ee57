"""The upstream POST on aiohttp: the hottest I/O in the gateway.

httpx's client spends about three times aiohttp's CPU on one small POST (URL and header
merging, auth and redirect layers, cookie extraction, httpcore's per-request socket poll);
on a gateway pinned to one core that is most of the proxy's own cost (bench/overhead.py).
`OpenAIProvider` uses this when it owns the network: no transport injected (tests inject
httpx.MockTransport) and no proxy configured in the environment (which httpx would honour).
Whole answers are `post`; streams are `open`, then `lines` — the request goes out before the
first token, so its cost is added to every stream's first token (issue 14 item 6).

Failures come out as the httpx exceptions httpx would have raised for the same fault, so the
provider maps both clients' errors through one set of `except` clauses.
"""

from __future__ import annotations

import asyncio
import ssl
import urllib.request
from collections.abc import AsyncIterator, Mapping

import aiohttp
import httpx
from yarl import URL


def environment_proxies() -> bool:
    """Whether HTTP(S)_PROXY / ALL_PROXY are set: httpx routes through them, this client does not."""
    proxies = urllib.request.getproxies()
    return any(proxies.get(scheme) for scheme in ("http", "https", "all"))


def as_httpx_error(err: aiohttp.ClientError) -> httpx.TransportError:
    """The httpx exception for the same fault (connect, timeout, broken or garbled answer)."""
    message = str(err) or type(err).__name__
    if isinstance(err, aiohttp.ConnectionTimeoutError):
        return httpx.ConnectTimeout(message)
    if isinstance(err, aiohttp.ServerTimeoutError):
        return httpx.ReadTimeout(message)
    if isinstance(err, aiohttp.ClientConnectorError):
        return httpx.ConnectError(message)
    if isinstance(err, (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError, aiohttp.ClientResponseError)):
        return httpx.RemoteProtocolError(message)
    return httpx.ReadError(message)


class FastPost:
    """One pooled aiohttp session per upstream, created in (and bound to) the running loop."""

    def __init__(
        self,
        base_url: str,
        headers: Mapping[str, str],
        *,
        timeout_s: float,
        connect_timeout_s: float,
        max_connections: int = 1000,
        keepalive_s: float = 5.0,
    ) -> None:
        self._base = base_url.rstrip("/")
        self._urls: dict[str, URL] = {}
        self._headers = {**headers, "content-type": "application/json"}
        # httpx's timeouts: each read, the connect, and the wait for a pooled connection.
        self._timeout = aiohttp.ClientTimeout(
            total=None, connect=timeout_s, sock_connect=connect_timeout_s, sock_read=timeout_s
        )
        self._ssl: ssl.SSLContext = httpx.create_ssl_context()  # the CA bundle httpx would use
        self._max_connections = max_connections
        self._keepalive_s = keepalive_s  # httpx's keep-alive expiry
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _url(self, path: str) -> URL:
        url = self._urls.get(path)
        if url is None:
            url = self._urls[path] = URL(self._base + path)
        return url

    def _session_here(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._loop is not loop:
            # A session belongs to one loop; the gateway runs in one, tests may run several.
            connector = aiohttp.TCPConnector(
                limit=self._max_connections, keepalive_timeout=self._keepalive_s, ssl=self._ssl
            )
            # No cookie jar: one session carries every team's calls, so a cookie the provider set
            # on one team's answer (a CDN's bot or load-balancer cookie) would ride on the others'.
            self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=self._timeout,
                auto_decompress=True,
                trust_env=False,
                cookie_jar=aiohttp.DummyCookieJar(),
            )
            self._loop = loop
        return self._session

    async def post(
        self, path: str, content: bytes, extra: Mapping[str, str] | None = None
    ) -> tuple[int, Mapping[str, str], bytes]:
        """POST `content` as JSON (with `extra` headers); the status, headers and whole body of the answer."""
        headers = self._headers if not extra else {**self._headers, **extra}
        try:
            async with self._session_here().post(
                self._url(path), data=content, headers=headers, allow_redirects=False
            ) as response:
                return response.status, response.headers, await response.read()
        except aiohttp.ClientError as err:
            raise as_httpx_error(err) from err

    async def open(self, path: str, content: bytes, extra: Mapping[str, str] | None = None) -> aiohttp.ClientResponse:
        """POST `content` as JSON for a stream: the answer with its status and headers read and
        its body not (read it with `lines`, then `finish` it)."""
        headers = self._headers if not extra else {**self._headers, **extra}
        try:
            return await self._session_here().post(
                self._url(path), data=content, headers=headers, allow_redirects=False
            )
        except aiohttp.ClientError as err:
            raise as_httpx_error(err) from err

    async def aclose(self) -> None:
        if self._session is not None and self._loop is asyncio.get_running_loop():
            await self._session.close()
        self._session = None


async def lines(response: aiohttp.ClientResponse) -> AsyncIterator[str]:
    """An answer's body as lines, each as soon as its end arrives (`\\n` or `\\r\\n` ends one;
    a line may be any length: a Responses stream's last event holds the whole response)."""
    pending = bytearray()
    try:
        async for data in response.content.iter_any():
            pending += data
            if b"\n" not in data:
                continue
            *complete, rest = pending.split(b"\n")
            pending = bytearray(rest)
            for line in complete:
                yield line.removesuffix(b"\r").decode("utf-8", "replace")
    except aiohttp.ClientError as err:
        raise as_httpx_error(err) from err
    if pending:
        yield pending.removesuffix(b"\r").decode("utf-8", "replace")


async def read(response: aiohttp.ClientResponse) -> bytes:
    """An answer's whole body (an error's), aiohttp's errors as httpx's."""
    try:
        return await response.read()
    except aiohttp.ClientError as err:
        raise as_httpx_error(err) from err


async def finish(response: aiohttp.ClientResponse) -> None:
    """Done with an answer: its connection goes back to the pool when its body was read to the
    end, and is closed otherwise (an upstream still sending must not reach the next request)."""
    if response.content.at_eof():
        response.release()
    else:
        response.close()
