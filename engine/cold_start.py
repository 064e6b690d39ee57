"""How long a request waits for an engine that is starting. Pure.

After an idle shutdown the next request starts the engine again, which takes tens of seconds
(45 s for SmolLM2 on two CPU cores). A request must not hang that long: clients time out (30 s
is common) and retry into the same wait. So a request waits at most `start_wait_s` (documented
in docs/engine.md); when the start is known to need longer it is answered at once — a 503 with
`retry-after` set to the time the start is expected to need, which the official SDKs honour
(they wait and retry) — and the start goes on in the background. A model with `fallbacks`
does not wait at all: its fallback answers while the engine starts.

The expected remaining time comes from a measured start of the same kind: a process's first
start (cold: nothing of vLLM in the page cache; the bundled model is converted first) takes
about twice as long as a restart after an idle shutdown (82 s against 35 s here), so a restart
is estimated from the last restart, never from the first start. The first start is estimated
from the first start a previous process measured on this machine (engine/first_start.py),
else from the model's configured `expected_start_s` (the bundled model
has one); with neither there is no estimate, and the request waits its bound.

`retry-after` stays within what the SDKs honour: openai-python 1.x and 2.x take at most 60 s
(a longer one is replaced by a sub-second backoff that spends the retry), 3.x at most 120 s.
"""

from __future__ import annotations

import math

MAX_RETRY_AFTER_S = 60.0  # the longest retry-after every openai / anthropic SDK honours


class EngineStarting(Exception):
    """The engine is starting and will not be ready within the request's wait."""

    def __init__(self, model: str, retry_after_s: float) -> None:
        super().__init__(
            f"the local engine for {model} is starting (after an idle shutdown or on first use); "
            f"try again in {math.ceil(retry_after_s)} s"
        )
        self.retry_after_s = retry_after_s


def expected_remaining(last_start_s: float | None, started_for_s: float | None) -> float | None:
    """Seconds the current start is expected to need still; None when there is no estimate
    (no start measured yet, or the model is still being prepared)."""
    if last_start_s is None or started_for_s is None:
        return None
    return max(0.0, last_start_s - started_for_s)


def wait_bound(remaining: float | None, start_wait_s: float) -> float | None:
    """How long a request may wait for the start; None: answer it now (the wait would exceed
    the bound)."""
    if remaining is not None and remaining > start_wait_s:
        return None
    return start_wait_s


def retry_after(remaining: float | None, start_wait_s: float) -> float:
    """What to tell a client that could not wait: the expected remaining start, at most what the
    SDKs honour; else (no estimate, or a start overdue: the estimate was wrong) the bound."""
    if remaining is None or remaining < 1.0:
        return max(1.0, start_wait_s)
    return min(remaining, MAX_RETRY_AFTER_S)
