"""A batch's input file: OpenAI's JSONL, one request per line, checked before anything runs.

Each line: `{"custom_id": "...", "method": "POST", "url": "/v1/chat/completions", "body": {...}}`.
The whole file is refused (the batch is created `failed`, with OpenAI-shaped `errors`) when a
line is not such an object, its url is not the batch's endpoint, or a custom_id repeats. A
body the endpoint would refuse is not a file error: that line's answer is a 400 in the error
file, as it would be for a synchronous request.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from gateway.core.context import Endpoint
from gateway.core.errors import InvalidRequest
from gateway.core.wire import check_depth

ENDPOINTS: dict[str, Endpoint] = {
    "/v1/chat/completions": Endpoint.CHAT,
    "/v1/completions": Endpoint.COMPLETIONS,
    "/v1/embeddings": Endpoint.EMBEDDINGS,
}
MAX_ERRORS = 100  # errors listed for a refused file; the rest are counted in the last message
MAX_CUSTOM_ID = 512


@dataclass(frozen=True, slots=True)
class BatchLine:
    line: int  # 0-based index among the file's non-blank lines: the key of its result
    custom_id: str
    body: dict[str, Any]


def _error(code: str, message: str, line: int | None = None, param: str | None = None) -> dict[str, Any]:
    return {"code": code, "message": message, "line": line, "param": param}


def _check(number: int, raw: bytes, endpoint: str) -> tuple[str, dict[str, Any]] | dict[str, Any]:
    """A line's custom_id and body, or the error that refuses it (`number` is 1-based)."""
    try:
        item = orjson.loads(raw)
        check_depth(raw, item)
    except orjson.JSONDecodeError:
        return _error("invalid_json_line", "this line is not valid JSON", number)
    except InvalidRequest as err:
        return _error("invalid_json_line", err.message, number)
    if not isinstance(item, dict):
        return _error("invalid_json_line", "this line is not a JSON object", number)
    custom_id = item.get("custom_id")
    if not isinstance(custom_id, str) or not 0 < len(custom_id) <= MAX_CUSTOM_ID:
        return _error(
            "invalid_custom_id", f"custom_id must be a string of 1 to {MAX_CUSTOM_ID} characters", number, "custom_id"
        )
    if str(item.get("method", "")).upper() != "POST":
        return _error("invalid_method", "method must be POST", number, "method")
    if item.get("url") != endpoint:
        return _error("mismatched_endpoint", f"url must be the batch's endpoint {endpoint}", number, "url")
    body = item.get("body")
    if not isinstance(body, dict):
        return _error("invalid_body", "body must be a JSON object", number, "body")
    return custom_id, body


def parse_input(data: bytes, endpoint: str, max_lines: int) -> tuple[list[BatchLine], list[dict[str, Any]]]:
    """The lines to run, and the errors that refuse the file (empty when it is fine)."""
    if endpoint not in ENDPOINTS:
        return [], [_error("invalid_endpoint", f"endpoint must be one of {', '.join(ENDPOINTS)}", param="endpoint")]
    lines: list[BatchLine] = []
    errors: list[dict[str, Any]] = []
    seen: set[str] = set()
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        checked = _check(number, raw, endpoint)
        if isinstance(checked, dict):
            errors.append(checked)
            continue
        custom_id, body = checked
        if custom_id in seen:
            errors.append(_error("duplicate_custom_id", f"custom_id {custom_id[:80]!r} repeats", number, "custom_id"))
            continue
        seen.add(custom_id)
        lines.append(BatchLine(len(lines), custom_id, body))
    if not lines and not errors:
        errors.append(_error("empty_file", "the input file has no requests"))
    if len(lines) > max_lines:
        errors.append(_error("too_many_lines", f"a batch may hold at most {max_lines} requests"))
    if len(errors) > MAX_ERRORS:
        errors = errors[: MAX_ERRORS - 1] + [
            _error("too_many_errors", f"{len(errors) - MAX_ERRORS + 1} more errors not listed")
        ]
    return lines, errors
