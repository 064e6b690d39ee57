"""What a request asks, parsed once from its body and headers (stages/check_body.py) and never
changed after: the model, whether to stream, the end user, the client's chargeback tags, and its
cache and cost controls. Who asks (the key's team, plan and tags) is the `Principal`; what the
gateway decided and what happened are the context's other parts (gateway/core/context.py)."""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from gateway.core.errors import InvalidRequest

TAG = re.compile(r"^[A-Za-z0-9_.:=/-]{1,64}$")
MAX_TAGS = 20  # a client's own tags (header, then metadata); the key's come on top


class CacheControl(enum.Flag):
    """The client's `x-costgate-cache` header: what the caches may do for this request."""

    DEFAULT = 0
    NO_CACHE = enum.auto()  # do not read
    NO_STORE = enum.auto()  # do not write

    @classmethod
    def parse(cls, header: str | None) -> CacheControl:
        flags = cls.DEFAULT
        for part in (header or "").lower().split(","):
            part = part.strip()
            if part == "no-cache":
                flags |= cls.NO_CACHE
            elif part == "no-store":
                flags |= cls.NO_STORE
        return flags


@dataclass(frozen=True, slots=True)
class Asked:
    """What the client asked (`RequestContext.asked`); the empty value until the body is read, so
    a request refused before that is recorded as asking for no model."""

    model: str = ""
    stream: bool = False
    user: str | None = None  # OpenAI's `user` field: the end user, for budgets and the ledger
    tags: tuple[str, ...] = ()  # x-costgate-tags, then `metadata` pairs; each once, at most MAX_TAGS
    cache_control: CacheControl = CacheControl.DEFAULT
    max_cost: Decimal | None = None  # x-costgate-max-cost-usd: the most a routing policy may choose

    @classmethod
    def of(cls, body: Mapping[str, Any], headers: Mapping[str, str]) -> Asked:
        """Parsed from a body its endpoint's wire model accepted; a malformed control header is
        refused (400, naming the header)."""
        tags = parse_tags(headers.get("x-costgate-tags"))
        metadata = body.get("metadata")
        if isinstance(metadata, dict):  # the client's own data: what cannot be a tag is skipped
            tags += [f"{k}={v}" for k, v in metadata.items() if TAG.match(f"{k}={v}")]
        user = body.get("user")
        return cls(
            model=body["model"],
            stream=bool(body.get("stream")),
            user=user if isinstance(user, str) and user else None,
            tags=tuple(dict.fromkeys(tags))[:MAX_TAGS],
            cache_control=CacheControl.parse(headers.get("x-costgate-cache")),
            max_cost=parse_max_cost(headers.get("x-costgate-max-cost-usd")),
        )


def parse_tags(header: str | None) -> list[str]:
    tags = [t.strip() for t in (header or "").split(",") if t.strip()]
    bad = [t for t in tags if not TAG.match(t)]
    if bad:
        raise InvalidRequest(
            f"invalid tag {bad[0][:70]!r}: use letters, digits and _.:=/- (at most 64)", param="x-costgate-tags"
        )
    return tags


def parse_max_cost(header: str | None) -> Decimal | None:
    if header is None:
        return None
    try:
        value = Decimal(header.strip())
    except InvalidOperation:
        raise InvalidRequest(
            "x-costgate-max-cost-usd must be a decimal dollar amount", param="x-costgate-max-cost-usd"
        ) from None
    if not value.is_finite() or value <= 0:
        raise InvalidRequest("x-costgate-max-cost-usd must be positive", param="x-costgate-max-cost-usd")
    return value


def parse_trace_id(header: str | None) -> str | None:
    """x-costgate-trace-id, kept as sent: the trace a request's ledger rows carry."""
    if header is not None and not 0 < len(header) <= 200:
        raise InvalidRequest("x-costgate-trace-id must be 1 to 200 characters", param="x-costgate-trace-id")
    return header
