"""Parsing a client's JSON body, with the nesting limit every later step can live with.

orjson reads values nested up to 1024 levels but writes only up to 254, and the gateway
writes a body again (the upstream call, cache keys, batch lines): a body nested deeper in a
field nobody checks once got through validation and failed there as a 500. It is refused
here instead, as 400.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.core.errors import InvalidRequest

MAX_DEPTH = 254  # the deepest value orjson.dumps writes


def parse_json_body(raw: bytes) -> Any:
    try:
        body = orjson.loads(raw)  # rejects invalid UTF-8 too
    except orjson.JSONDecodeError as err:
        raise InvalidRequest(f"the request body is not valid JSON: {err}") from None
    check_depth(raw, body)
    return body


def check_depth(raw: bytes, body: Any) -> None:
    """Raise InvalidRequest if `body` (parsed from `raw`) nests deeper than MAX_DEPTH."""
    # Counting brackets is a cheap bound on the depth: only bodies with more of them than
    # the limit (long conversations, say) pay for the real check.
    if raw.count(b"[") + raw.count(b"{") <= MAX_DEPTH:
        return
    try:
        # The real check is the writer itself: it fails on exactly the values it cannot write,
        # and a value parsed from JSON can fail it for no other reason.
        orjson.dumps(body)
    except orjson.JSONEncodeError:
        raise InvalidRequest(f"the request body nests deeper than {MAX_DEPTH} levels") from None
