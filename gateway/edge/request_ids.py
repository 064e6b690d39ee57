"""`RequestIds`: every answer and error carries its request's id in the header its API's SDK
reads, and echoes the client's own id.

OpenAI's SDKs read `x-request-id` (`response._request_id`), Anthropic's read `request-id`
(`message._request_id`); a client may send `x-client-request-id`, and OpenAI echoes it. The id
is made here, once, at the edge, and kept in the ASGI scope's state: the pipeline's request
context takes it (`request_id(scope)`), so the header, `x-costgate-request-id`, the ledger row,
the access-log line and the trace all carry the same id. An answer that already names an id in
its API's header (an Anthropic error body quotes it too) keeps its own.

It also writes the access-log line of every request the pipeline did not log itself (a refused
key, `/v1/models`, the admin API): the pipeline's requests are marked (`mark_logged`) and get
their fuller line when they settle (gateway/edge/access_log.py). Health checks, metrics scrapes and
the dashboard's pages log at DEBUG. A bug that escapes a route before it answered is answered
here (500, OpenAI's shape, with the id) and logged with its traceback.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import MutableMapping
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.core.errors import GatewayError, error_response
from gateway.edge.access_log import log_edge

log = logging.getLogger("costgate")

STATE_KEY = "costgate.request_id"
LOGGED_KEY = "costgate.logged"  # the pipeline writes this request's access-log line
API_PREFIXES = ("/v1/", "/admin/")  # logged at INFO; the rest (health, metrics, the dashboard) at DEBUG
OPENAI_HEADER = b"x-request-id"
ANTHROPIC_HEADER = b"request-id"
CLIENT_HEADER = b"x-client-request-id"
MAX_CLIENT_ID_BYTES = 512  # OpenAI's limit on x-client-request-id


def new_request_id() -> str:
    return "req_" + secrets.token_hex(12)


def request_id(scope: MutableMapping[str, Any]) -> str:
    """The id `RequestIds` gave this request; a new one for a request that did not pass it."""
    state = scope.get("state")
    found = state.get(STATE_KEY) if isinstance(state, dict) else None
    return found if isinstance(found, str) else new_request_id()


def mark_logged(scope: MutableMapping[str, Any]) -> None:
    """The pipeline has this request: its access-log line comes when it settles."""
    state = scope.get("state")
    if isinstance(state, dict):
        state[LOGGED_KEY] = True


def id_headers(scope: Scope, rid: str) -> list[tuple[bytes, bytes]]:
    """The headers to add: the id under the API's own name, and the client's id echoed."""
    anthropic = scope["path"].startswith("/v1/messages")
    client: bytes | None = None
    for name, value in scope["headers"]:
        if name == CLIENT_HEADER:
            client = value
        elif name == b"anthropic-version":  # an Anthropic SDK, on a shared route (/v1/models)
            anthropic = True
    headers = [(ANTHROPIC_HEADER if anthropic else OPENAI_HEADER, rid.encode())]
    if client and len(client) <= MAX_CLIENT_ID_BYTES:
        headers.append((CLIENT_HEADER, client))
    return headers


class RequestIds:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        rid = new_request_id()
        state = scope.get("state")
        if not isinstance(state, dict):
            state = scope["state"] = {}
        state[STATE_KEY] = rid
        extra = id_headers(scope, rid)
        status = 500  # what the server answers when the app fails before it starts a response
        started_response = False

        async def send_with_id(message: Message) -> None:
            nonlocal status, started_response
            if message["type"] == "http.response.start":
                status, started_response = message["status"], True
                headers = list(message.get("headers", ()))
                present = {name.lower() for name, _ in headers}
                headers.extend(h for h in extra if h[0] not in present)
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except Exception as err:  # a bug outside the pipeline: answer 500 here, with the id
            if started_response:
                raise
            log.exception("unhandled error", exc_info=err)
            await error_response(GatewayError("internal error in the gateway"))(scope, receive, send_with_id)
        finally:
            if not state.get(LOGGED_KEY):
                path = scope["path"]
                level = logging.INFO if path.startswith(API_PREFIXES) else logging.DEBUG
                log_edge(rid, scope["method"], path, status, started, level)
