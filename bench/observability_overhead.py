"""Per-request CPU of what issue 28 added to the hot path, in process: the access-log line
(text and JSON, written to /dev/null, and with its level off) and the request-id middleware
(measured against the same app without it). Tracing off costs one header lookup a call.

    PYTHONPATH=. .venv/bin/python bench/observability_overhead.py
"""

import asyncio
import logging
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from starlette.datastructures import Headers

from gateway.core.asked import Asked
from gateway.core.context import Endpoint, Principal, RequestContext
from gateway.edge.access_log import TEXT_FORMAT, JsonFormatter, log_request
from gateway.edge.request_ids import RequestIds


def ctx():
    c = RequestContext(
        request_id="req_0123456789abcdef01234567",
        endpoint=Endpoint.CHAT,
        body={},
        api_key="k",
        headers=Headers({}),
        principal=Principal("team_1", "team-a", "key_1"),
        asked=Asked("small"),
    )
    c.outcome.served_by("small", "openai")
    c.outcome.finish()
    return c


def per_call(fn, n=20000):
    for _ in range(1000):
        fn()
    t = time.process_time()
    for _ in range(n):
        fn()
    return (time.process_time() - t) / n * 1e6


root = logging.getLogger()
root.setLevel(logging.INFO)
sink = open(os.devnull, "w")
h = logging.StreamHandler(sink)
root.addHandler(h)
c = ctx()
h.setFormatter(logging.Formatter(TEXT_FORMAT))
text = per_call(lambda: log_request(c))
h.setFormatter(JsonFormatter())
js = per_call(lambda: log_request(c))
root.setLevel(logging.WARNING)
off = per_call(lambda: log_request(c))


async def app(scope, receive, send):
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": b"{}"})


async def noop(m):
    pass


async def rcv():
    return {"type": "http.request"}


mw = RequestIds(app)
scope = {
    "type": "http",
    "path": "/v1/chat/completions",
    "method": "POST",
    "headers": [(b"authorization", b"Bearer x"), (b"content-type", b"application/json")],
}
loop = asyncio.new_event_loop()


def with_mw():
    loop.run_until_complete(mw(dict(scope), rcv, noop))


def without():
    loop.run_until_complete(app(dict(scope), rcv, noop))


ids = per_call(with_mw, 5000) - per_call(without, 5000)
print(
    f"access line text {text:.1f} us, json {js:.1f} us, level off {off:.2f} us;"
    f" request-id middleware {ids:.1f} us (CPU per request)"
)
