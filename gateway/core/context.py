"""The data that flows through the pipeline: who is asking, what they asked, what it cost."""

from __future__ import annotations

import enum
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Protocol

from engine.admission import Priority
from gateway.core.asked import Asked
from gateway.core.meter import Meter
from gateway.core.request_view import RequestView
from policies.budgets import Hold
from policies.exact_cache import CachePolicy, RequestKeys
from policies.rate_limits import RateCheck, RateHeadroom

UNMETERED = "the answer could not be metered: charged the request's hold (issue 24, fail closed)"

if TYPE_CHECKING:
    from policies.semantic_cache.store import QuestionVectors


class Endpoint(enum.Enum):
    CHAT = "chat.completions"
    COMPLETIONS = "completions"
    EMBEDDINGS = "embeddings"
    # Only as an upstream call's endpoint, to a deployment that serves the API itself (config
    # `apis`); a request's own endpoint is one of the three above (gateway/compat).
    RESPONSES = "responses"
    MESSAGES = "messages"


class Api(enum.Enum):
    """An API a client may speak other than its endpoint's own: the pipeline works on its
    Chat Completions translation (gateway/apis), and the answer goes back in this API."""

    RESPONSES = "responses"
    MESSAGES = "messages"


class CacheStatus(enum.Enum):
    MISS = "miss"
    EXACT = "exact"
    SEMANTIC = "semantic"


@dataclass(slots=True)
class Outcome:
    """What happened to a request: who answered it (a deployment, or a cache), how it ended, the
    answer kept for the caches, when its first token left. Its part of the request's state
    (`RequestContext.outcome`), written only by these methods; settle, the ledger row, the
    headers, the access log and the trace read it."""

    served_model: str | None = None
    provider: str | None = None
    native_answer: bool = False  # the answer came from an upstream that speaks the client's API
    cascade_tier: int | None = None  # the cascade tier whose answer the client got (0: the cheapest)
    cache_status: CacheStatus = CacheStatus.MISS
    status_code: int = 200
    error: str | None = None
    response_body: dict[str, Any] | None = None  # the parsed upstream answer, for the caches
    finish_reason: str | None = None  # how a stream's first choice ended, as its upstream said
    first_token_at: float | None = None
    finished_at: float | None = None

    def served_by(self, model: str, provider: str, *, native: bool = False, tier: int | None = None) -> None:
        """Deployment `model` answers the client (`native`: in the client's own API; `tier`: as a
        cascade's tier)."""
        self.served_model, self.provider, self.native_answer = model, provider, native
        if tier is not None:
            self.cascade_tier = tier

    def by_tier(self, tier: int) -> None:
        """The answer the client gets is a cascade's tier `tier`'s (0: the cheapest)."""
        self.cascade_tier = tier

    def from_cache(self, status: CacheStatus, model: str) -> None:
        """A cache answers, with what `model` once answered."""
        self.cache_status, self.served_model = status, model
        self.first_token()

    def answered(self, body: dict[str, Any] | None) -> None:
        """The whole answer, parsed: what the caches keep."""
        self.response_body = body

    def ended(self, finish_reason: str) -> None:
        """The stream's first choice ended, for `finish_reason` (the caches keep it, or not)."""
        self.finish_reason = finish_reason

    def first_token(self, only_first: bool = False) -> None:
        """The first token leaves now (`only_first`: unless one already did)."""
        if not (only_first and self.first_token_at is not None):
            self.first_token_at = time.perf_counter()

    def failed(self, status: int, message: str) -> None:
        self.status_code, self.error = status, message

    def cut_short(self, reason: str) -> str:
        """A stream ended by the gateway (at its hold) before the upstream ended it: `reason`."""
        self.error = reason
        return reason

    def noted(self, error: str) -> None:
        """What went wrong on an answer whose status stands (a stream cut at its hold, an answer
        charged its hold); the first such note stays."""
        self.error = self.error or error

    def client_left(self) -> None:
        """The client disconnected before the answer ended: 499, nginx's "client closed request"
        (charged what the upstream produced until then; no cache keeps a cut answer)."""
        if self.status_code < 400:
            self.failed(499, "the client disconnected before the answer ended")

    def finish(self) -> None:
        if self.finished_at is None:
            self.finished_at = time.perf_counter()


@dataclass(frozen=True, slots=True)
class BatchLineRef:
    """A Batch API line (the caller's batch and the line's custom_id): a deployment whose provider
    sells batch processing answers it through its own Batch API (gateway/providers/batch_api.py)."""

    batch_id: str
    custom_id: str
    at_provider: bool = False  # its model's provider runs it in a batch of its own (gateway/batch/runner.py)


@dataclass(frozen=True, slots=True)
class Principal:
    """The caller, resolved from its API key."""

    team_id: str
    team_name: str
    key_id: str
    plan: str = "pro"
    allowed_models: frozenset[str] | None = None  # None: every model
    tags: tuple[str, ...] = ()

    def may_use(self, model: str) -> bool:
        return self.allowed_models is None or model in self.allowed_models


@dataclass(slots=True)
class CacheDecision:
    """What the caches may do for one request, decided once by the exact-cache stage and read
    again when the answer is stored."""

    keys: RequestKeys
    policy: CachePolicy
    team_id: str
    team_name: str
    vector: QuestionVectors | None = None  # the question's vectors, once the semantic lookup made them


@dataclass(slots=True)
class Decisions:
    """What was decided for a request (`RequestContext.decided`), each by the one stage or route
    target that decides it, then read by those after: the limits that count it and the budget
    hold it was admitted with, the class it runs in, the share of the local engine's price it is
    charged, the model a routing policy chose, what the caches may do."""

    limits: tuple[RateCheck, ...] = ()  # named by the rate-limit stage, checked in the budget stage's one call
    headroom: RateHeadroom | None = None  # what the per-minute limits left, for the rate-limit headers
    hold: Hold | None = None  # the budget hold settle commits and releases (stages/budget.py)
    priority: Priority = Priority.INTERACTIVE  # x-costgate-priority or the key's plan (stages/priority.py)
    price_factor: Decimal = Decimal(1)  # 1 - the batch lane's discount (gateway/batch/runner.py)
    route: str | None = None  # a routing policy's choice, made once: the hold and the call agree
    cache: CacheDecision | None = None  # from the cache lookup to the store at settle (stages/cache.py)


@dataclass(frozen=True, slots=True)
class NativeRequest:
    """The client's own body, for deployments that speak its API natively (config `apis`):
    they are sent it (allow-listed) instead of the chat translation, which every policy still
    reads (worst case, cache keys, limits, tags)."""

    api: Api
    body: dict[str, Any]  # as the client sent it
    history: tuple[dict[str, Any], ...] | None = None  # the stored conversation costgate resolved, if any
    headers: tuple[tuple[str, str], ...] = ()  # the API's own headers a native upstream is sent (anthropic-beta…)
    # What the Chat Completions translation left out: named in x-costgate-dropped-params when a
    # translated call is made (a native one is sent them all).
    translation_dropped: tuple[str, ...] = ()


class Trace(Protocol):
    """A request's OpenTelemetry span (gateway/upstream/tracing.py), when tracing is on."""

    @property
    def trace_id(self) -> str:
        """The OpenTelemetry trace id in hex, for the access log."""
        ...

    def finish(self, ctx: RequestContext) -> None: ...


class SideCall(Protocol):
    """Calls made on a request's behalf after it was answered (a cascade's shadow sample). They
    run through a pipeline of their own (gateway/pipeline.py `SideLane`: record, budget, then
    `run`), so they are held against and charged to the same budgets, and recorded, like any
    request."""

    def worst_case_cost(self, ctx: RequestContext) -> Decimal: ...

    async def run(self, ctx: RequestContext) -> None: ...


@dataclass(slots=True)
class RequestContext:
    """One request's state. Stages fill it in order; settle reads all of it.

    `body` is what the client asked, parsed once and never replaced (the caches' keys, the
    ledger, the limits and the holds read it), and `asked` what the gateway reads of it and of
    the headers; `sent_body` is what the upstream is sent, the same unless compression shortened
    the messages (`sent_messages`).

    What its upstream calls cost is its `meter` (gateway/core/meter.py), written only by the
    meter's methods. A cascade's shadow sample is not one of its calls: it is a side request with
    a context, a budget hold and a ledger row of its own (`SideCall`). In the batch lane each call
    the bundled engine (provider `local`) answers is charged at `decided.price_factor` of its price.
    """

    request_id: str
    endpoint: Endpoint
    body: dict[str, Any]
    api_key: str | None
    headers: Mapping[str, str]  # the client's request headers (case-insensitive)
    started: float = field(default_factory=time.perf_counter)
    created_at: float = field(default_factory=time.time)
    principal: Principal | None = None  # who asks: the key's team, plan and tags
    asked: Asked = Asked()  # what it asks, parsed with the body (stages/check_body.py), never changed
    trace_id: str | None = None  # x-costgate-trace-id; a shadow-sampled request's own id (routing/sampling.py)
    batch_line: BatchLineRef | None = None  # set for a Batch API line (gateway/batch/runner.py)
    meter: Meter = field(default_factory=Meter)  # what its upstream calls cost (gateway/core/meter.py)
    decided: Decisions = field(default_factory=Decisions)  # what the stages decided for it
    outcome: Outcome = field(default_factory=Outcome)  # what happened to it
    trace: Trace | None = None  # the request's span, when OTLP export is on (gateway/upstream/tracing.py)
    completion_text: list[str] = field(default_factory=list)  # a stream's answer text, for caches and samples
    # All a stream generated (text, tool calls, reasoning): what a charge counts when no usage comes.
    generated: list[str] = field(default_factory=list)
    compressed_tokens: int = 0  # prompt tokens context compression removed (issue 5)
    sent_messages: list[dict[str, Any]] | None = None  # the messages compression sends instead of the client's
    settled: bool = False  # the pipeline settled this request (it does so once)
    dropped_params: set[str] = field(default_factory=set)  # body fields no deployment called was sent
    prompt_bounds: dict[str, int] = field(default_factory=dict)  # billable prompt tokens by deployment (worst_case.py)
    api: Api | None = None  # the client's API, when it is not the endpoint's own (gateway/compat)
    native: NativeRequest | None = None  # the client's body, for an upstream that speaks its API
    _view: RequestView | None = field(default=None, repr=False)

    def set_body(self, body: dict[str, Any]) -> None:
        """The client's body, read and parsed (gateway/pipeline.py), once: what was asked stays
        as asked; a policy that rewrites what the upstream is sent says so in `sent_messages`."""
        self.body, self._view = body, None

    @property
    def tags(self) -> tuple[str, ...]:
        """The request's chargeback tags: its key's, then the client's own, each once."""
        keys = self.principal.tags if self.principal is not None else ()
        return tuple(dict.fromkeys((*keys, *self.asked.tags))) if keys else self.asked.tags

    @property
    def api_name(self) -> str:
        """The API the client spoke, as the ledger row and the access log name it."""
        return self.endpoint.value if self.api is None else self.api.value

    @property
    def sent_body(self) -> dict[str, Any]:
        """What the upstream is sent before each deployment's own fields are picked: the body as
        asked, with the messages a policy rewrote (compression) in place of the client's."""
        if self.sent_messages is None:
            return self.body
        return {**self.body, "messages": self.sent_messages}

    @property
    def view(self) -> RequestView:
        """What the gateway reads in the body (output cap, completions, usage chunk, question),
        read once. Compression may shorten the messages later; none of these change with it."""
        if self._view is None:
            self._view = RequestView.of(self.body)
        return self._view

    def charge_unmetered(self, worst: Decimal) -> None:
        """Fail closed: calls that answered but were never metered are charged `worst` (the
        request's hold), the most the provider can have billed them, and the row says so."""
        if self.meter.charge_unmetered(worst):
            self.outcome.noted(UNMETERED)

    def lane_factor(self, provider: str) -> Decimal:
        """The share of a call's price charged: the batch lane's discount is the local engine's."""
        return self.decided.price_factor if provider == "local" else Decimal(1)

    @property
    def latency_s(self) -> float:
        end = self.outcome.finished_at
        return (end if end is not None else time.perf_counter()) - self.started

    @property
    def ttft_s(self) -> float | None:
        first = self.outcome.first_token_at
        return None if first is None else first - self.started
