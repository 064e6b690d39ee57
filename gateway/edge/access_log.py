"""The access log: one line a request on the `costgate.access` logger, carrying its id.

A request through the pipeline gets its line when it settles (gateway/stages/record.py): who
asked, the model asked and served, status, tokens, cost, latency, cache, cascade tier, and what
went wrong. Every other request (a refused key, `/v1/models`, the admin API) gets a shorter line
from the edge (gateway/edge/request_ids.py). Success is INFO; a failure of the gateway or upstream
(5xx) and a client that left mid-stream (499) are WARNING; a refusal (4xx) is INFO, with its
error. `costgate serve --log-format json` (or the config's `log_format: json`) writes every log
line as one JSON object, the access fields as top-level keys (docs/observability.md).
"""

from __future__ import annotations

import logging
import time
from typing import Any

import orjson

from gateway.core.context import RequestContext
from policies.pricing import format_usd

log = logging.getLogger("costgate.access")
CLIENT_GONE = 499  # nginx's "client closed request": the ledger and the log say so


def level_for(status: int) -> int:
    return logging.WARNING if status >= 500 or status == CLIENT_GONE else logging.INFO


def request_fields(ctx: RequestContext) -> dict[str, Any]:
    """What the line says about a request the pipeline handled."""
    p, outcome, meter = ctx.principal, ctx.outcome, ctx.meter
    ttft = ctx.ttft_s
    return {
        "request_id": ctx.request_id,
        "team": p.team_name if p else None,
        "key_id": p.key_id if p else None,
        "api": ctx.api_name,
        "model": ctx.asked.model or None,
        "served_model": outcome.served_model,
        "provider": outcome.provider,
        "status": outcome.status_code,
        "stream": ctx.asked.stream,
        "prompt_tokens": meter.usage.prompt_tokens,
        "completion_tokens": meter.usage.completion_tokens,
        "cost_usd": format_usd(meter.cost),
        "latency_ms": round(ctx.latency_s * 1000, 2),
        "ttft_ms": None if ttft is None else round(ttft * 1000, 2),
        "cache": outcome.cache_status.value,
        "cascade_tier": outcome.cascade_tier,
        "trace_id": ctx.trace_id,
        "otel_trace_id": ctx.trace.trace_id if ctx.trace is not None else None,
        "error": outcome.error,
    }


def log_request(ctx: RequestContext) -> None:
    level = level_for(ctx.outcome.status_code)
    if log.isEnabledFor(level):
        fields = request_fields(ctx)
        log.log(level, text_line(fields), extra={"access": fields})


def log_edge(request_id: str, method: str, path: str, status: int, started: float, level: int) -> None:
    """The line of a request outside the pipeline (`started`: its time.perf_counter())."""
    level = max(level, level_for(status))
    if log.isEnabledFor(level):
        fields = {
            "request_id": request_id,
            "method": method,
            "path": path,
            "status": status,
            "latency_ms": round((time.perf_counter() - started) * 1000, 2),
        }
        log.log(level, text_line(fields), extra={"access": fields})


def text_line(fields: dict[str, Any]) -> str:
    """`req_… key=value …`, leaving out what is empty; a value with spaces is quoted."""
    parts = [str(fields["request_id"])]
    for name, value in fields.items():
        if name == "request_id" or value is None or value is False:
            continue
        text = str(value)
        if " " in text or '"' in text:
            text = orjson.dumps(text).decode()
        parts.append(f"{name}={text}")
    return " ".join(parts)


class JsonFormatter(logging.Formatter):
    """Every log record as one JSON line; an access line's fields become top-level keys."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
        }
        access = getattr(record, "access", None)
        if isinstance(access, dict):
            line.update(access)
        else:
            line["message"] = record.getMessage()
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(line, default=str).decode()


TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure_logging(level: str, json_lines: bool) -> None:
    """The process's log handler: text or JSON lines on stderr, at `level` (also for the
    libraries: httpx's per-request INFO lines show only at debug)."""
    handler = logging.StreamHandler()
    formatter = JsonFormatter() if json_lines else logging.Formatter(TEXT_FORMAT)
    formatter.converter = time.gmtime
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    numeric = logging.getLevelName(level.upper())
    root.setLevel(numeric if isinstance(numeric, int) else logging.INFO)
    logging.getLogger("httpx").setLevel(logging.DEBUG if root.level <= logging.DEBUG else logging.WARNING)
