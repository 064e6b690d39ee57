"""`RequestGuard`: refuses unauthenticated and oversized requests before any body is read.

FastAPI reads and parses a route's body before it runs the route's dependencies, so a check
in `Depends` comes too late: six 200 MB POSTs with a wrong admin key once took the process from
300 MB to 1.9 GB. This ASGI middleware runs first:

- the admin API (`/admin/...`, but not the dashboard at `/admin/ui`, which has its own
  sign-in) and the OpenAPI document need the admin key as a bearer token; without it the
  answer is 401 and the body is never read;
- every body is capped by its path (`BodyLimits.cap_for`), except the three pipeline
  endpoints', which cap their own (gateway/routes/openai.py). A declared length over the cap
  answers 413 at once. Small bodies (the admin API, the dashboard, /v1/batches, /v1/feedback)
  are read here, up to the cap, and handed on whole: FastAPI would turn an error raised while it
  reads into a 400. Other bodies (an upload to /v1/files, any other /v1 route) stream on to their route,
  which checks the key before it reads; they are counted as they arrive and raise
  `BodyTooLarge` (413) at the cap.

Both refusals close the connection, so a client cannot stream the rest of a huge body into it.
"""

from __future__ import annotations

import hmac
from collections.abc import Collection
from dataclasses import dataclass

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.core.errors import AuthenticationFailed, BodyTooLarge, GatewayError, error_body
from gateway.metrics import Metrics

ADMIN_AREAS = ("/admin/", "/openapi.json")  # need the admin key (the dashboard excepted)
DASHBOARD = "/admin/ui"
FEEDBACK = "/v1/feedback"  # a small JSON body, capped like the admin API's
MULTIPART_SLACK = 64 * 1024  # the form's own bytes around an uploaded file


def bearer_token(authorization: str | None) -> str | None:
    scheme, _, token = (authorization or "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def bearer_matches(authorization: str | None, key: str) -> bool:
    """Whether an Authorization header carries `key` as a bearer token (compared in constant time)."""
    token = bearer_token(authorization)
    return bool(key) and token is not None and hmac.compare_digest(token.encode(), key.encode())


@dataclass(frozen=True, slots=True)
class Cap:
    limit: int
    buffered: bool  # read whole here (small bodies) or counted as the route reads them


@dataclass(frozen=True, slots=True)
class BodyLimits:
    small: int  # the admin API and /v1/batches
    dashboard: int  # sign-in and the dashboard's forms
    file: int  # an upload to /v1/files: the configured file limit plus the form's overhead
    default: int  # any other route: the /v1 body limit

    def cap_for(self, path: str) -> Cap:
        if path.startswith(DASHBOARD):
            return Cap(self.dashboard, True)
        if path.startswith(ADMIN_AREAS) or path.startswith("/v1/batches") or path == FEEDBACK:
            return Cap(self.small, True)
        if path == "/v1/files":
            return Cap(self.file, False)
        return Cap(self.default, False)


def needs_admin_key(path: str) -> bool:
    return path.startswith(ADMIN_AREAS) and not path.startswith(DASHBOARD)


class RequestGuard:
    def __init__(
        self, app: ASGIApp, *, admin_key: str, limits: BodyLimits, metrics: Metrics, self_capped: Collection[str]
    ) -> None:
        self.app = app
        self.admin_key = admin_key
        self.limits = limits
        self.metrics = metrics
        self.self_capped = self_capped  # paths whose handlers cap their own bodies

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in self.self_capped:
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        headers = dict(scope["headers"])
        if needs_admin_key(path) and not bearer_matches(_text(headers.get(b"authorization")), self.admin_key):
            self.metrics.unauthenticated.labels("openapi" if path == "/openapi.json" else "admin").inc()
            await _refuse(send, AuthenticationFailed("admin routes need the admin key", code="invalid_admin_key"))
            return
        cap = self.limits.cap_for(path)
        declared = _text(headers.get(b"content-length")) or ""
        if declared.isdigit() and int(declared) > cap.limit:
            await _refuse(send, BodyTooLarge(f"the request body is larger than {cap.limit} bytes"))
            return
        if not cap.buffered:
            await self.app(scope, _capped(receive, cap.limit), send)
            return
        body = await _read_capped(receive, cap.limit)
        if body is None:
            await _refuse(send, BodyTooLarge(f"the request body is larger than {cap.limit} bytes"))
            return
        await self.app(scope, _replay(body, receive), send)


async def _read_capped(receive: Receive, limit: int) -> bytes | None:
    """The whole body, or None once it passes `limit` (the rest is never read)."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b""  # the client went away: the app sees the disconnect on its next receive
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()  # e.g. http.disconnect, for a streaming answer
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


def _capped(receive: Receive, limit: int) -> Receive:
    seen = 0

    async def capped() -> Message:
        nonlocal seen
        message = await receive()
        seen += len(message.get("body", b""))
        if seen > limit:
            raise BodyTooLarge(f"the request body is larger than {limit} bytes")
        return message

    return capped


async def _refuse(send: Send, err: GatewayError) -> None:
    body = error_body(err)
    await send(
        {
            "type": "http.response.start",
            "status": err.status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _text(value: bytes | None) -> str | None:
    return None if value is None else value.decode("latin-1")
