"""A client's JSON into pydantic models, with errors that name the parameter the way the
API's own errors do (`input[2].call_id`, `tools[0].type`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from gateway.core.errors import InvalidRequest

M = TypeVar("M", bound=BaseModel)

# pydantic puts the member it tried into an error's location for a union field
# (`('input', 'str')`); such a tag is not part of the client's parameter path.
_UNION_TAGS = frozenset({"str", "int", "float", "bool", "dict", "list", "none"})


def param_path(loc: Sequence[str | int], prefix: str = "") -> str:
    path = prefix
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part.isidentifier() and part not in _UNION_TAGS:
            path += f".{part}" if path else part
    return path


def validate(model: type[M], data: Any, at: str = "") -> M:
    """`data` as a `model`, or InvalidRequest naming the first bad parameter (under `at`)."""
    if not isinstance(data, dict):
        raise InvalidRequest(f"Invalid '{at or 'body'}': expected an object.", param=at or None)
    try:
        return model.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        param = param_path(first["loc"], at)
        if first["type"] == "extra_forbidden":
            raise InvalidRequest(f"Unknown parameter: '{param}'.", param=param, code="unknown_parameter") from None
        raise InvalidRequest(f"Invalid '{param}': {first['msg']}.", param=param) from None


def unsupported(param: str, why: str) -> InvalidRequest:
    """The error for a parameter costgate understands but cannot honour: refused, not dropped."""
    return InvalidRequest(f"'{param}' is not supported: {why}", param=param, code="unsupported_parameter")


# parameter -> (is it harmless as given?, why it is refused otherwise)
Refusals = Mapping[str, tuple[Callable[[Any], bool], str]]


def unset(value: Any) -> bool:
    """Absent, or set to what asks for nothing."""
    return value is None or value is False or value == 0 or value == [] or value == {}


def check_refusals(model: BaseModel, refusals: Refusals, at: str = "") -> None:
    for name, (harmless, why) in refusals.items():
        if not harmless(getattr(model, name)):
            raise unsupported(f"{at}.{name}" if at else name, why)


def missing(param: str) -> InvalidRequest:
    return InvalidRequest(f"Missing required parameter: '{param}'.", param=param, code="missing_required_parameter")
