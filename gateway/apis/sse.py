"""Server-sent events with a named `event:` line, as the Responses and Messages APIs send them.

Anthropic's SDK skips an event that has no `event:` line, so the name is not optional; in both
APIs it equals the payload's `type`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson


def sse(event: dict[str, Any]) -> bytes:
    return b"event: " + str(event["type"]).encode() + b"\ndata: " + orjson.dumps(event) + b"\n\n"


def sse_all(events: Iterable[dict[str, Any]]) -> bytes:
    return b"".join(sse(e) for e in events)
