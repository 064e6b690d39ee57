"""The request view (gateway/core/request_view.py): what the gateway reads in a body, in one place."""

from __future__ import annotations

import pytest

from gateway.core.context import Endpoint, RequestContext
from gateway.core.request_view import RequestView, asked_output_tokens, completion_count, wants_usage_chunk


@pytest.mark.parametrize(
    "body, expected",
    [
        ({"max_tokens": 10}, 10),
        ({"max_completion_tokens": 7, "max_tokens": 10}, 7),
        ({"max_tokens": 0}, None),
        ({"max_tokens": True}, None),  # a bool is not a token count
        ({"max_tokens": "9"}, None),
        ({}, None),
    ],
)
def test_asked_output_tokens(body: dict, expected: int | None) -> None:
    assert asked_output_tokens(body) == expected


@pytest.mark.parametrize(
    "body, expected",
    [
        ({"stream_options": {"include_usage": True}}, True),
        ({"stream_options": {"include_usage": False}}, False),
        ({"stream_options": "yes"}, False),
        ({}, False),
    ],
)
def test_wants_usage_chunk(body: dict, expected: bool) -> None:
    assert wants_usage_chunk(body) is expected


def test_view_reads_the_body_once_and_again_after_set_body() -> None:
    body = {
        "model": "m",
        "stream": True,
        "n": 2,
        "max_tokens": 5,
        "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": "q?"}],
    }
    ctx = RequestContext(request_id="r", endpoint=Endpoint.CHAT, body=body, api_key=None, headers={})
    assert ctx.view == RequestView("m", True, 5, 2, True, "q?")
    assert completion_count(body) == ctx.view.completions
    ctx.set_body({"model": "other", "prompt": ["a", "b"], "best_of": 3})
    assert ctx.view == RequestView("other", False, None, 6, False, "")
