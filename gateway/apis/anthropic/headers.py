"""The headers Anthropic's clients send: the key, and `anthropic-version`.

The key comes as `x-api-key` (SDKs before 2.0, curl examples) or as a bearer token (SDKs
from 2.0 on); when both are there, `x-api-key` wins, as at Anthropic.

Two versions of the Messages API exist and both are served. 2026-10-21 (what SDKs from 2.0
on send) removed temperature, top_p and top_k and refuses citations on user text blocks;
2023-06-01 has them. A missing version is taken as 2023-06-01 (Anthropic itself refuses a
request without one, but curl users forget it); an unknown one is refused. `anthropic-beta`
flags are not checked: a beta feature reaches costgate as parameters or blocks, and those
are translated or refused one by one.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from gateway.core.errors import InvalidRequest


class ApiVersion(enum.Enum):
    V2023_06_01 = "2023-06-01"
    V2026_10_21 = "2026-10-21"


def api_key(headers: Mapping[str, str]) -> str | None:
    key = headers.get("x-api-key", "").strip()
    if key:
        return key
    scheme, _, token = headers.get("authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def api_version(headers: Mapping[str, str]) -> ApiVersion:
    value = headers.get("anthropic-version")
    if value is None:
        return ApiVersion.V2023_06_01
    try:
        return ApiVersion(value.strip())
    except ValueError:
        known = ", ".join(v.value for v in ApiVersion)
        raise InvalidRequest(
            f"anthropic-version: '{value}' is not a version costgate serves ({known})", param="anthropic-version"
        ) from None
