"""The APIs' shared parsing (gateway/apis/parsing.py): a client's JSON into a pydantic model,
or a 400 naming the first bad parameter the way the API's own errors do."""

from __future__ import annotations

from typing import Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict

from gateway.apis.parsing import check_refusals, missing, param_path, unset, unsupported, validate
from gateway.core.errors import InvalidRequest


class Call(BaseModel):
    model_config = ConfigDict(extra="forbid")
    call_id: str
    type: Literal["function_call_output"]


class Request(BaseModel):
    model_config = ConfigDict(extra="forbid")
    model: str
    input: str | list[dict[str, Any]]
    calls: list[Call] = []
    store: bool = False
    tools: list[dict[str, Any]] = []


@pytest.mark.parametrize(
    "loc, prefix, path",
    [
        (("input", 2, "call_id"), "", "input[2].call_id"),
        (("tools", 0, "type"), "", "tools[0].type"),
        (("input", "str"), "", "input"),  # the union member pydantic tried is not a parameter
        (("input", "list[Call]", 0, "type"), "", "input[0].type"),
        (("text", "format"), "body", "body.text.format"),
        ((), "messages[1]", "messages[1]"),
    ],
)
def test_param_path(loc: tuple[str | int, ...], prefix: str, path: str) -> None:
    assert param_path(loc, prefix) == path


def test_a_valid_body_becomes_the_model() -> None:
    parsed = validate(
        Request, {"model": "small", "input": "hi", "calls": [{"call_id": "c1", "type": "function_call_output"}]}
    )
    assert parsed.model == "small" and parsed.calls[0].call_id == "c1"


@pytest.mark.parametrize(
    "data, at, param, code, message",
    [
        (
            {"model": "m", "input": "x", "stream_everything": True},
            "",
            "stream_everything",
            "unknown_parameter",
            "Unknown parameter: 'stream_everything'.",
        ),
        (
            {
                "model": "m",
                "input": "x",
                "calls": [{"call_id": "c1", "type": "function_call_output"}, {"type": "call"}],
            },
            "",
            "calls[1].call_id",
            "invalid_request",
            "Invalid 'calls[1].call_id': Field required.",
        ),
        ({"model": "m", "input": 7}, "", "input", "invalid_request", None),  # neither union member: the field
        ({"input": "x"}, "", "model", "invalid_request", "Invalid 'model': Field required."),
        ({"model": "m", "input": "x", "store": "perhaps"}, "", "store", "invalid_request", None),
        ({"model": 5, "input": "x"}, "body", "body.model", "invalid_request", None),
        ("not an object", "", None, "invalid_request", "Invalid 'body': expected an object."),
        (["a list"], "input[3]", "input[3]", "invalid_request", "Invalid 'input[3]': expected an object."),
    ],
)
def test_a_bad_body_is_a_400_naming_its_first_bad_parameter(
    data: Any, at: str, param: str | None, code: str, message: str | None
) -> None:
    with pytest.raises(InvalidRequest) as refused:
        validate(Request, data, at)
    err = refused.value
    assert (err.status, err.param, err.code) == (400, param, code)
    if message is not None:
        assert err.message == message


@pytest.mark.parametrize(
    "value, is_unset",
    [
        (None, True),
        (False, True),
        (0, True),
        ([], True),
        ({}, True),
        (True, False),
        (1, False),
        (["x"], False),
        ("", False),
    ],
)
def test_unset_means_asking_for_nothing(value: Any, is_unset: bool) -> None:
    assert unset(value) is is_unset


def test_a_parameter_that_cannot_be_honoured_is_refused_not_dropped() -> None:
    refusals = {"store": (unset, "costgate keeps no responses"), "tools": (unset, "no tools here")}
    check_refusals(Request(model="m", input="x"), refusals)  # both harmless as given
    with pytest.raises(InvalidRequest) as refused:
        check_refusals(Request(model="m", input="x", tools=[{"type": "web_search"}]), refusals, at="body")
    err = refused.value
    assert (err.param, err.code) == ("body.tools", "unsupported_parameter")
    assert err.message == "'body.tools' is not supported: no tools here"
    assert unsupported("n", "one choice only").status == 400


def test_a_missing_parameter_names_itself() -> None:
    err = missing("max_tokens")
    assert (err.status, err.param, err.code) == (400, "max_tokens", "missing_required_parameter")
    assert err.message == "Missing required parameter: 'max_tokens'."
