"""Every non-OpenAI provider (Anthropic, Bedrock, Vertex…) through litellm's async API.

litellm is imported on first use, never at start-up: the import is slow, and it must not
reach the network (the price map is pinned to the bundled copy before the import).
"""

from __future__ import annotations

import functools
import logging
import os
import re
from collections.abc import AsyncIterator
from typing import Any

import orjson

from gateway.core.context import Endpoint
from gateway.core.errors import (
    GatewayError,
    InvalidRequest,
    UnreadableAnswer,
    UpstreamError,
    UpstreamNotFound,
    UpstreamTimeout,
)
from gateway.core.request_fields import FieldPolicy
from gateway.providers.base import Completion, StreamEvent, UpstreamCall, redact, usage_from
from gateway.providers.openai_compatible import ProviderError
from gateway.providers.retry import Retryable, parse_retry_after, with_retries


@functools.cache  # imported and quieted once: every call reads it, and setLevel clears logging's caches
def _litellm() -> Any:
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    import litellm

    # Else litellm prints "Give Feedback / Get Help" and its provider list on the console for
    # each error it maps: costgate's own log says what failed (gateway/edge/access_log.py).
    litellm.suppress_debug_info = True
    # Its loggers have no level of their own: under a gateway run at `--log-level info` they
    # would print a line per call ("LiteLLM completion() model=..."). Its warnings still show.
    for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy"):
        logging.getLogger(name).setLevel(logging.WARNING)
    return litellm


# Media types of a whole answer or an error page: an upstream that sends one to a stream request
# did not stream (litellm would turn it into an empty stream that ends "stop"). Streams come as
# server-sent events or in a provider's own type (Bedrock's `application/vnd.amazon.eventstream`,
# Ollama's `application/x-ndjson`), which pass.
WHOLE_ANSWER_TYPES = ("application/json", "text/html")
UNSUPPORTED = re.compile(r"does not support parameters: \[?([^\]\n]*?)\]?, for model")


def _unsupported(err: Exception, model: str) -> InvalidRequest:
    """litellm's refusal of parameters its provider lacks, in words a costgate user can act on:
    litellm's own advice (set `litellm.drop_params`, send `allowed_openai_params`) names
    settings that only an operator's costgate config reaches, as the model's `drop_params`."""
    found = UNSUPPORTED.search(str(getattr(err, "message", "")))
    names = ", ".join(n.strip(" '\"") for n in found.group(1).split(",")) if found else "some parameters"
    return InvalidRequest(
        f"model {model!r} does not take {names}: leave them out of the request, or ask the operator to list"
        " them in the model's `drop_params` in costgate's config (then they are dropped and named in the"
        " x-costgate-dropped-params header)",
        code="unsupported_parameter",
    )


# litellm prefixes its messages with its class names ("litellm.ContextWindowExceededError:
# ContextWindowExceededError: ") and the provider's ("OpenAIException - "): neither means
# anything to costgate's client.
LITELLM_PREFIX = re.compile(r"^(?:\s*(?:litellm\.\w+|\w*(?:Exception|Error))\s*[:-]\s*)+")


def _provider_message(err: Exception, secret: bytes) -> str:
    """The provider's own words from a litellm error: its JSON error message when litellm
    quoted one, without litellm's prefixes, the provider key redacted."""
    text = LITELLM_PREFIX.sub("", str(getattr(err, "message", "") or ""))
    quoted = text.find("{")
    if quoted >= 0:
        found = ProviderError.parse(text[quoted:].encode())
        if found.message:
            text = found.message
    return redact(text.encode(), secret).decode() or "the upstream refused the request"


def _retry_after(err: Exception) -> float | None:
    """The provider's `retry-after`, which litellm keeps on the error's response headers."""
    for headers in (
        getattr(err, "litellm_response_headers", None),
        getattr(getattr(err, "response", None), "headers", None),
    ):
        if headers is not None and hasattr(headers, "get"):
            found = parse_retry_after(headers.get("retry-after"))
            if found is not None:
                return found
    return None


def _translate(err: Exception, secret: bytes, model: str = "") -> Exception:
    """litellm's exception classes, as the gateway errors an OpenAI-compatible upstream's
    answer would have given (gateway/providers/openai_compatible.py): the provider's message without
    litellm's class names, `context_length_exceeded` on `messages`, a 429's `retry-after`. A
    gateway error (a stream's malformed event, raised inside the same `try`) stays as it is."""
    if isinstance(err, GatewayError):
        return err
    litellm = _litellm()
    if isinstance(err, litellm.UnsupportedParamsError):
        return _unsupported(err, model)
    if isinstance(err, litellm.Timeout):
        return UpstreamTimeout("upstream timed out")
    if isinstance(err, litellm.RateLimitError):
        return Retryable("upstream answered 429", status=429, retry_after=_retry_after(err))
    if isinstance(err, litellm.APIConnectionError):
        return Retryable(f"cannot connect to the upstream of model {model!r}", code="upstream_unreachable")
    if isinstance(err, (litellm.InternalServerError, litellm.ServiceUnavailableError)):
        status = getattr(err, "status_code", 503)
        return Retryable(f"upstream answered {status}", status=status, retry_after=_retry_after(err))
    if isinstance(err, litellm.ContextWindowExceededError):
        message = _provider_message(err, secret)
        return InvalidRequest(message, code="context_length_exceeded", param="messages")
    if isinstance(err, litellm.NotFoundError):
        return UpstreamNotFound(_provider_message(err, secret))
    if isinstance(err, (litellm.BadRequestError, litellm.UnprocessableEntityError)):
        refused = InvalidRequest(_provider_message(err, secret), code="upstream_invalid_request")
        refused.status = getattr(err, "status_code", 400)
        return refused
    status = getattr(err, "status_code", None)
    return UpstreamError(f"upstream answered {status}" if isinstance(status, int) else "the upstream call failed")


def _redacted(data: dict[str, Any], secret: bytes) -> tuple[bytes, dict[str, Any]]:
    """A litellm answer as the bytes and dict a client gets, the provider key redacted."""
    raw = orjson.dumps(data)
    clean = redact(raw, secret)
    return (raw, data) if clean is raw else (clean, orjson.loads(clean))


def _media_type(chunks: Any) -> str:
    """The media type the upstream answered a stream request with ("" when litellm kept none)."""
    hidden = getattr(chunks, "_hidden_params", None) or {}
    headers = hidden.get("additional_headers") or {} if isinstance(hidden, dict) else {}
    value = headers.get("llm_provider-content-type") if isinstance(headers, dict) else None
    return value.split(";", 1)[0].strip().lower() if isinstance(value, str) else ""


class LiteLLMStream:
    def __init__(self, chunks: Any, secret: bytes) -> None:
        self._chunks = chunks
        self._secret = secret

    async def __aiter__(self) -> AsyncIterator[StreamEvent]:
        try:
            async for chunk in self._chunks:
                yield StreamEvent(*_redacted(chunk.model_dump(exclude_none=True), self._secret))
        except Exception as err:  # litellm raises its own tree; translate, never swallow
            raise _translate(err, self._secret) from err

    async def aclose(self) -> None:
        close = getattr(self._chunks, "aclose", None)
        if close is not None:
            await close()


class LiteLLMMessagesStream:
    """litellm's Messages passthrough stream (the upstream's server-sent events as bytes), as
    events: split at blank lines, each `data:` payload parsed, the provider key redacted."""

    def __init__(self, chunks: Any, secret: bytes) -> None:
        self._chunks = chunks
        self._secret = secret

    async def __aiter__(self) -> AsyncIterator[StreamEvent]:
        pending = b""
        try:
            async for chunk in self._chunks:
                pending += chunk if isinstance(chunk, bytes) else str(chunk).encode()
                *frames, pending = pending.replace(b"\r\n", b"\n").split(b"\n\n")
                for frame in frames:
                    event = _sse_event(frame, self._secret)
                    if event is not None:
                        yield event
        except Exception as err:  # litellm raises its own tree; translate, never swallow
            raise _translate(err, self._secret) from err
        event = _sse_event(pending, self._secret)
        if event is not None:
            yield event

    async def aclose(self) -> None:
        close = getattr(self._chunks, "aclose", None)
        if close is not None:
            await close()


def _sse_event(frame: bytes, secret: bytes) -> StreamEvent | None:
    data = b"\n".join(line[5:].strip() for line in frame.split(b"\n") if line.startswith(b"data:"))
    if not data:
        return None
    raw = redact(data, secret)
    try:
        parsed = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise UpstreamError("upstream stream carried an event that is not JSON", code="bad_upstream_stream") from None
    if not isinstance(parsed, dict):
        raise UpstreamError("upstream stream carried an event that is not an object", code="bad_upstream_stream")
    if parsed.get("type") == "error":
        raise UpstreamError("upstream stream failed", code="upstream_stream_error")
    return StreamEvent(raw, parsed)


class LiteLLMProvider:
    """`provider: litellm` — `model` is litellm's name, e.g. `anthropic/claude-haiku-4-5`."""

    def __init__(
        self,
        name: str,
        model: str,
        api_key: str | None,
        api_base: str | None = None,
        *,
        timeout_s: float = 600.0,
        max_retries: int = 2,
        fields: FieldPolicy = FieldPolicy(),
    ) -> None:
        self.name = name
        self.model = model
        self.max_retries = max_retries
        self.fields = fields
        self._extra = {k: v for k, v in (("api_key", api_key), ("api_base", api_base)) if v}
        self._secret = api_key.encode() if api_key else b""
        self._timeout = timeout_s

    def kwargs_for(self, call: UpstreamCall) -> dict[str, Any]:
        """litellm's keyword arguments for a call. The allow-list is applied again here, where body
        fields become keyword arguments, whichever path built the body (gateway/core/request_fields.py):
        where to connect, with what key, and nothing else, comes from the config alone."""
        body, _ = self.fields.split(call.endpoint.value, call.body)
        # the trace context, and a native Messages call's anthropic-version and anthropic-beta
        extra = {"extra_headers": dict(call.headers)} if call.headers else {}
        return {**body, **self._extra, **extra, "model": self.model, "timeout": self._timeout, "num_retries": 0}

    async def _messages(self, call: UpstreamCall) -> Any:
        """litellm's Messages passthrough: Anthropic's own API (or Bedrock's, Vertex's) with the
        client's body, so thinking signatures and cache markers arrive as they were sent."""
        from litellm.anthropic_interface import messages

        try:
            return await messages.acreate(**self.kwargs_for(call))
        except Exception as err:  # litellm raises its own tree; translate, never swallow
            raise _translate(err, self._secret, self.name) from err

    async def complete(self, call: UpstreamCall) -> Completion:
        return await with_retries(lambda: self._complete_once(call), self.max_retries)

    async def _complete_once(self, call: UpstreamCall) -> Completion:
        if call.endpoint is Endpoint.MESSAGES:
            raw, body = _redacted(dict(await self._messages(call)), self._secret)
            return Completion(body, raw, None)  # priced by gateway/upstream/native_calls.py from the Message
        litellm = _litellm()
        fn = (
            litellm.aembedding
            if call.endpoint is Endpoint.EMBEDDINGS
            else (litellm.atext_completion if call.endpoint is Endpoint.COMPLETIONS else litellm.acompletion)
        )
        try:
            response = await fn(**self.kwargs_for(call))
        except Exception as err:  # litellm raises its own tree; translate, never swallow
            raise _translate(err, self._secret, self.name) from err
        raw, body = _redacted(response.model_dump(exclude_none=True), self._secret)
        return Completion(body, raw, usage_from(body.get("usage")))

    async def open_stream(self, call: UpstreamCall) -> LiteLLMStream | LiteLLMMessagesStream:
        return await with_retries(lambda: self._open_stream_once(call), self.max_retries)

    async def _open_stream_once(self, call: UpstreamCall) -> LiteLLMStream | LiteLLMMessagesStream:
        if call.endpoint is Endpoint.MESSAGES:
            return LiteLLMMessagesStream(await self._messages(call), self._secret)
        litellm = _litellm()
        try:
            chunks = await litellm.acompletion(**self.kwargs_for(call))
        except Exception as err:
            raise _translate(err, self._secret, self.name) from err
        stream = LiteLLMStream(chunks, self._secret)
        if _media_type(chunks) in WHOLE_ANSWER_TYPES:
            await stream.aclose()
            raise UnreadableAnswer("upstream answered a stream request without server-sent events")
        return stream

    async def aclose(self) -> None:
        return None
