"""Checking a batch's JSONL input, as a table."""

from __future__ import annotations

import json

import pytest

from gateway.batch.input import MAX_ERRORS, parse_input
from gateway.batch.runner import failures_after, retry_delay_s
from gateway.storage.batches import ResultRow

CHAT = "/v1/chat/completions"


def line(custom_id: object = "a", url: str = CHAT, method: str = "POST", body: object = None) -> bytes:
    return json.dumps(
        {"custom_id": custom_id, "method": method, "url": url, "body": {"model": "m"} if body is None else body}
    ).encode()


@pytest.mark.parametrize(
    "data, endpoint, codes, n_lines",
    [
        (line("a") + b"\n" + line("b"), CHAT, [], 2),
        (line("a") + b"\n\n  \n" + line("b") + b"\n", CHAT, [], 2),  # blank lines skipped
        (line("a", url="/v1/embeddings"), "/v1/embeddings", [], 1),
        (b"{nope", CHAT, ["invalid_json_line"], 0),
        (b"[1, 2]", CHAT, ["invalid_json_line"], 0),
        (line(custom_id=7), CHAT, ["invalid_custom_id"], 0),
        (line(custom_id=""), CHAT, ["invalid_custom_id"], 0),
        (line(custom_id="x" * 513), CHAT, ["invalid_custom_id"], 0),
        (line(method="GET"), CHAT, ["invalid_method"], 0),
        (line(url="/v1/completions"), CHAT, ["mismatched_endpoint"], 0),
        (line(body=[1]), CHAT, ["invalid_body"], 0),
        (
            line(body={"model": "m", "x": json.loads("[" * 300 + "]" * 300)}),
            CHAT,
            ["invalid_json_line"],
            0,
        ),  # unwritable
        (line(body={"model": "m", "x": json.loads("[" * 250 + "]" * 250)}), CHAT, [], 1),
        (line("a") + b"\n" + line("a"), CHAT, ["duplicate_custom_id"], 1),
        (b"", CHAT, ["empty_file"], 0),
        (line("a"), "/v1/images/generations", ["invalid_endpoint"], 0),
        (b"\n".join(line(str(i)) for i in range(4)), CHAT, ["too_many_lines"], 4),  # max_lines = 3 below
    ],
)
def test_parse_input(data: bytes, endpoint: str, codes: list[str], n_lines: int) -> None:
    lines, errors = parse_input(data, endpoint, max_lines=3)
    assert [e["code"] for e in errors] == codes
    assert len(lines) == n_lines
    assert [x.line for x in lines] == list(range(n_lines))


def test_error_lines_are_one_based_and_capped() -> None:
    data = b"\n".join([line("ok")] + [b"bad"] * (MAX_ERRORS + 10))
    _, errors = parse_input(data, CHAT, max_lines=10)
    assert errors[0]["line"] == 2
    assert len(errors) == MAX_ERRORS and errors[-1]["code"] == "too_many_errors"


@pytest.mark.parametrize(
    "status, body, before, after",
    [
        (200, "{}", 0, 0),
        (400, "{}", 1, 1),  # final: not a retry
        (500, "{}", 0, 1),
        (502, "{}", 2, 3),
        (429, '{"error": {"code": "rate_limit_exceeded"}}', 1, 1),  # waiting for capacity
        (503, '{"error": {"code": "batch_lane_busy"}}', 0, 0),
        (503, '{"error": {"code": "unavailable"}}', 0, 1),
    ],
)
def test_failures_after(status: int, body: str, before: int, after: int) -> None:
    assert failures_after(ResultRow(0, "c", "req_x", status, body), before) == after


@pytest.mark.parametrize("tries, delay", [(1, 0.25), (2, 0.5), (3, 1.0), (6, 8.0), (7, 10.0), (100, 10.0)])
def test_retry_delay(tries: int, delay: float) -> None:
    assert retry_delay_s(tries) == delay
