"""Reading a client's JSON body (gateway/core/wire.py): what orjson reads, the gateway can write
again — a body nested deeper than orjson writes is a 400 here, not a 500 later."""

from __future__ import annotations

import orjson
import pytest

from gateway.core.errors import InvalidRequest
from gateway.core.wire import MAX_DEPTH, parse_json_body


def nested(depth: int) -> bytes:
    """A chat body whose `metadata` nests `depth` levels below the body itself."""
    return b'{"model": "m", "metadata": ' + b'{"a": ' * depth + b"1" + b"}" * depth + b"}"


@pytest.mark.parametrize("depth", [1, MAX_DEPTH - 1])
def test_a_body_the_gateway_can_write_again_is_read(depth: int) -> None:
    body = parse_json_body(nested(depth))
    assert body["model"] == "m" and orjson.loads(orjson.dumps(body)) == body


@pytest.mark.parametrize("depth", [MAX_DEPTH, 1000])
def test_a_body_nested_past_the_writers_limit_is_a_400(depth: int) -> None:
    with pytest.raises(InvalidRequest) as refused:
        parse_json_body(nested(depth))
    assert refused.value.status == 400 and str(MAX_DEPTH) in refused.value.message


def test_many_brackets_side_by_side_are_not_depth() -> None:
    messages = [{"role": "user", "content": [{"type": "text", "text": str(i)}]} for i in range(500)]
    raw = orjson.dumps({"model": "m", "messages": messages})
    assert parse_json_body(raw)["messages"][499]["content"][0]["text"] == "499"


@pytest.mark.parametrize("raw", [b"{not json", b"", b'{"model": "m"', b'"\xff\xfe"', b'{"a": NaN}'])
def test_what_is_not_json_is_a_400(raw: bytes) -> None:
    with pytest.raises(InvalidRequest) as refused:
        parse_json_body(raw)
    assert refused.value.status == 400 and "not valid JSON" in refused.value.message
