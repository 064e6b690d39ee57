"""`create_app(settings)`: the HTTP app over one `Gateway` (gateway/service.py): its routes, the
guard in front of them, health, metrics and the error handlers."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from sqlalchemy import text
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect
from starlette.responses import JSONResponse, Response

from gateway.config.settings import Settings
from gateway.core.errors import AuthenticationFailed, GatewayError, InvalidRequest, error_response
from gateway.dashboard.endpoints import MAX_FORM_BYTES
from gateway.dashboard.endpoints import install as install_dashboard
from gateway.edge.guard import MULTIPART_SLACK, BodyLimits, RequestGuard, bearer_matches
from gateway.edge.request_ids import RequestIds
from gateway.routes import admin, admin_budgets, cache_admin, feedback, messages, openai, responses
from gateway.routes import batch as batch_routes
from gateway.routes import cascades as cascade_routes
from gateway.routes import engine as engine_routes
from gateway.service import Gateway, build_gateway

log = logging.getLogger("costgate")


def create_app(settings: Settings, transport: httpx.AsyncBaseTransport | None = None) -> FastAPI:
    gateway = build_gateway(settings, transport)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await gateway.start()
        try:
            yield
        finally:
            await gateway.stop()

    # No /docs or /redoc; the OpenAPI document needs the admin key (RequestGuard).
    app = FastAPI(title="costgate", version="0.1.0", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.gateway = gateway
    app.include_router(openai.router)
    pipeline_routes = openai.hot_routes() + responses.routes() + messages.routes()
    app.router.routes[:0] = pipeline_routes  # matched before the FastAPI routes (see there)
    app.include_router(admin.router)
    app.include_router(cache_admin.router)
    app.include_router(feedback.router)  # POST /v1/feedback, and /admin/feedback (issue 12)
    app.include_router(feedback.admin_router)
    app.include_router(cascade_routes.router)
    app.include_router(batch_routes.router)
    app.include_router(admin_budgets.router)
    app.include_router(engine_routes.router)  # GET /admin/engine (issue 6)
    install_dashboard(app)  # /admin/ui: its own session auth, not the admin bearer key
    _add_health_routes(app, gateway)
    _add_error_handlers(app)
    _hoist_schema_defs(app)
    limits = BodyLimits(
        settings.admin_max_body_bytes,
        MAX_FORM_BYTES,
        settings.batch.max_file_bytes + MULTIPART_SLACK,
        settings.max_body_bytes,
    )
    app.add_middleware(
        RequestGuard,
        admin_key=gateway.admin_key,
        limits=limits,
        metrics=gateway.metrics,
        self_capped=frozenset(r.path for r in pipeline_routes if r.methods and "POST" in r.methods),
    )
    app.add_middleware(RequestIds)  # outermost: the guard's refusals carry an id too
    return app


def _add_health_routes(app: FastAPI, gateway: Gateway) -> None:
    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> dict:
        return {"status": "ok"}

    @app.get("/readyz", include_in_schema=False)
    async def readyz() -> Response:
        try:
            async with gateway.db.connect() as conn:
                await conn.execute(text("SELECT 1"))
        except Exception as err:  # any database failure means "not ready"; report it, keep serving
            return JSONResponse({"status": "unavailable", "database": type(err).__name__}, status_code=503)
        return JSONResponse({"status": "ready", "ledger_pending": gateway.ledger.pending})

    @app.get("/metrics", include_in_schema=False)
    async def metrics(request: Request) -> Response:
        key = gateway.settings.metrics_key  # team names are in the metrics: see docs/gateway.md
        if key is not None:
            given = request.headers.get("authorization")
            if not (bearer_matches(given, key) or bearer_matches(given, gateway.admin_key)):
                gateway.metrics.unauthenticated.labels("metrics").inc()
                return error_response(
                    AuthenticationFailed("/metrics needs the metrics key", code="invalid_metrics_key")
                )
        return Response(gateway.metrics.render(), media_type="text/plain; version=0.0.4")


def _add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(GatewayError)
    async def gateway_error(_request: Request, err: GatewayError) -> Response:
        return error_response(err)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, err: HTTPException) -> Response:
        message = str(err.detail)
        if err.status_code in (404, 405) and message in ("Not Found", "Method Not Allowed"):
            # the router's bare phrase: say which URL, as OpenAI does ("Invalid URL (GET /v1/x)")
            message = f"Invalid URL ({request.method} {request.url.path})"
            allow = {k.lower(): v for k, v in (err.headers or {}).items()}.get("allow")
            if err.status_code == 405 and allow:
                message += f": the method is not allowed there (allowed: {allow})"
        mapped = GatewayError(message, code="not_found" if err.status_code == 404 else "http_error")
        mapped.status, mapped.type = err.status_code, "invalid_request_error"
        return error_response(mapped, dict(err.headers or {}))

    @app.exception_handler(RequestValidationError)
    async def validation_error(_request: Request, err: RequestValidationError) -> Response:
        first = err.errors()[0] if err.errors() else {"loc": (), "msg": "invalid request"}
        param = ".".join(str(p) for p in first["loc"] if p != "body")
        return error_response(InvalidRequest(f"invalid '{param}': {first['msg']}", param=param or None))

    @app.exception_handler(ClientDisconnect)
    async def client_went_away(request: Request, _err: ClientDisconnect) -> Response:
        # Not the gateway's fault and nothing to fix: one line, not a traceback per cut upload.
        log.info("client disconnected before its request body ended: %s %s", request.method, request.url.path)
        return Response(status_code=400)  # nobody reads it: the connection is gone

    # Any other exception is a bug: RequestIds (gateway/edge/request_ids.py), around every
    # route, logs it and answers 500 in OpenAI's shape, with the request's id.


def _hoist_schema_defs(app: FastAPI) -> None:
    """The OpenAI routes describe their bodies with pydantic schemas whose `$defs` must live
    in the OpenAPI document's components for the references to resolve."""
    original = app.openapi

    def openapi() -> dict:
        if app.openapi_schema:
            return app.openapi_schema
        schema = original()
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        for path in schema.get("paths", {}).values():
            for op in path.values():
                body = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema", {})
                components.update(body.pop("$defs", {}))
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
