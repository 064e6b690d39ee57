"""Rate-limit arithmetic: per-minute sliding windows and daily quotas, as pure functions.

A per-minute limit is a sliding window approximated from two fixed windows (the current
minute and the previous one, weighted by how much of it still overlaps the last 60 s) — the
same estimate Cloudflare and Redis's own docs use: two counters per limit, exact within a few
percent, and no burst of twice the limit at a minute boundary as a fixed window allows. A daily
quota is a fixed UTC day. The Redis Lua script computes the same formula (`admit.lua`).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Any

MINUTE = 60
DAY = 86_400


class Limit(enum.Enum):
    REQUESTS_PER_MINUTE = "rpm"
    TOKENS_PER_MINUTE = "tpm"
    TOKENS_PER_DAY = "tpd"

    @property
    def window_s(self) -> int:
        return DAY if self is Limit.TOKENS_PER_DAY else MINUTE

    @property
    def sliding(self) -> bool:
        return self is not Limit.TOKENS_PER_DAY


@dataclass(frozen=True, slots=True)
class RateCheck:
    """One limit to check and count for a request: `amount` more of `limit` for `subject`
    (`key:key_1`, `team:team_1`) must stay within `maximum`."""

    limit: Limit
    subject: str
    maximum: int
    amount: int

    def counter(self, now: float, previous: bool = False) -> str:
        index = window_index(self.limit.window_s, now) - (1 if previous else 0)
        return f"rl:{self.limit.value}:{self.subject}:{index}"


SHARED, TEAM_SHARE = "model:", ":team:"  # the subjects of a model's shared limits


def shared_checks(
    model: str, team: str, requests_per_minute: int | None, tokens_per_minute: int | None, share: float, tokens: int
) -> tuple[RateCheck, ...]:
    """A provider's per-minute limits on `model`'s key, which every team shares: the whole of
    each (`model:<name>`) and `team`'s share of it (`model:<name>:team:<id>`, rounded up)."""
    checks = []
    for limit, maximum, amount in (
        (Limit.REQUESTS_PER_MINUTE, requests_per_minute, 1),
        (Limit.TOKENS_PER_MINUTE, tokens_per_minute, tokens),
    ):
        if maximum is not None:
            checks.append(RateCheck(limit, f"{SHARED}{model}", maximum, amount))
            checks.append(RateCheck(limit, f"{SHARED}{model}{TEAM_SHARE}{team}", math.ceil(maximum * share), amount))
    return tuple(checks)


def window_index(window_s: int, now: float) -> int:
    return int(now // window_s)


def estimate(current: int, previous: int, window_s: int, now: float, sliding: bool) -> float:
    """How much of the limit the last `window_s` seconds used."""
    if not sliding:
        return float(current)
    elapsed = (now % window_s) / window_s
    return previous * (1.0 - elapsed) + current


def allows(check: RateCheck, current: int, previous: int, now: float) -> bool:
    used = estimate(current, previous, check.limit.window_s, now, check.limit.sliding)
    return used + check.amount <= check.maximum


def retry_after(check: RateCheck, now: float) -> int:
    """Seconds to wait before trying again: to the end of the current window (whole seconds,
    at least 1), after which a sliding window has shed at least the previous minute's weight."""
    return max(1, math.ceil(reset_s(check, now)))


def estimate_tokens(body: dict[str, Any]) -> int:
    """A cheap count of a request's prompt tokens (about 4 characters each) for admission:
    the rate-limit counters are corrected to the upstream's true usage at settle, so this only
    has to be close, and it costs no tokenizer pass on the request path."""
    chars = 0
    for message in body.get("messages") or ():
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            chars += len(content)
        elif isinstance(content, list):
            chars += sum(len(p.get("text") or "") for p in content if isinstance(p, dict))
        chars += 16  # role and framing
    for field in ("prompt", "input"):
        value = body.get(field)
        if isinstance(value, str):
            chars += len(value)
        elif isinstance(value, list):
            chars += sum(len(v) if isinstance(v, str) else 4 * len(v) if isinstance(v, list) else 0 for v in value)
    return max(1, (chars + 3) // 4)


@dataclass(frozen=True, slots=True)
class Headroom:
    """What is left of one per-minute limit: OpenAI's `x-ratelimit-*` and Anthropic's
    `anthropic-ratelimit-*` headers say it."""

    limit: int
    remaining: int
    reset_s: float  # until the window's use is shed: the current window's end


@dataclass(frozen=True, slots=True)
class RateHeadroom:
    """The tightest per-minute request and token limits that applied to a request (the key's
    or its team's, whichever has less left), when it was admitted or refused."""

    requests: Headroom | None
    tokens: Headroom | None
    now: float


def headroom(checks: tuple[RateCheck, ...], used: tuple[int, ...], now: float) -> RateHeadroom | None:
    """From the admitted checks and each one's use in its window (this request counted)."""
    found: dict[Limit, Headroom] = {}
    for check, count in zip(checks, used):
        if check.limit is Limit.TOKENS_PER_DAY:
            continue  # the headers speak of per-minute limits
        room = Headroom(check.maximum, max(0, check.maximum - count), reset_s(check, now))
        if check.limit not in found or room.remaining < found[check.limit].remaining:
            found[check.limit] = room
    if not found:
        return None
    return RateHeadroom(found.get(Limit.REQUESTS_PER_MINUTE), found.get(Limit.TOKENS_PER_MINUTE), now)


def refused_headroom(check: RateCheck, now: float) -> RateHeadroom | None:
    """The limit that refused a request: none of it left until the window ends."""
    if check.limit is Limit.TOKENS_PER_DAY:
        return None
    room = Headroom(check.maximum, 0, reset_s(check, now))
    requests = check.limit is Limit.REQUESTS_PER_MINUTE
    return RateHeadroom(room if requests else None, None if requests else room, now)


def reset_s(check: RateCheck, now: float) -> float:
    window_s = check.limit.window_s
    return window_s - (now % window_s)
