"""Capped retries with backoff that honours the upstream's `retry-after`."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

from gateway.core.errors import UpstreamError, UpstreamRateLimited

T = TypeVar("T")

RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})
MAX_RETRY_AFTER_S = 5.0  # longer asks are not waited out here: the caller falls back instead


class Retryable(UpstreamError):
    """An upstream failure worth another try (connect error, 429, 5xx)."""

    def __init__(
        self, message: str, *, status: int | None = None, retry_after: float | None = None, code: str | None = None
    ) -> None:
        super().__init__(message, code=code, retry_after=retry_after)
        self.upstream_status = status

    def final(self) -> UpstreamError:
        """The error the client sees once retries are spent."""
        if self.upstream_status == 429:
            return UpstreamRateLimited(self.message, retry_after=self.retry_after)
        return UpstreamError(self.message, code=self.code)


def backoff_s(attempt: int, retry_after: float | None, base: float = 0.1) -> float:
    """Delay before retry number `attempt` (0-based): the upstream's ask, else jittered exponential."""
    if retry_after is not None:
        return min(max(retry_after, 0.0), MAX_RETRY_AFTER_S)
    return base * (2**attempt) * (0.5 + random.random())


def parse_retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        return None  # an HTTP date: treated as "no hint"


async def with_retries(
    send: Callable[[], Awaitable[T]], max_retries: int, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
) -> T:
    """Call `send` until it succeeds or `max_retries` retries are spent."""
    attempt = 0
    while True:
        try:
            return await send()
        except Retryable as err:
            too_long = err.retry_after is not None and err.retry_after > MAX_RETRY_AFTER_S
            if attempt >= max_retries or too_long:
                raise err.final() from err
            await sleep(backoff_s(attempt, err.retry_after))
            attempt += 1
