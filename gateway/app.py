"""`create_app(settings)`: builds every stateful object once and hangs it on the app."""

from __future__ import annotations

import logging
import os
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from sqlalchemy import text
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect
from starlette.responses import JSONResponse, Response

from gateway.batch.runner import BatchRunner
from gateway.context import Endpoint, Principal, RequestContext
from gateway.dashboard.router import MAX_FORM_BYTES
from gateway.dashboard.router import install as install_dashboard
from gateway.deployments import Deployment, build_deployments
from gateway.errors import AuthenticationFailed, GatewayError, InvalidRequest, error_response
from gateway.guard import MULTIPART_SLACK, BodyLimits, RequestGuard, bearer_matches
from gateway.inflight import StreamJournal, recover_streams
from gateway.metrics import Metrics
from gateway.pipeline import Pipeline, StageParts, build_stages
from gateway.providers.replicas import ReplicaCollector
from gateway.response_cache import build_cache
from gateway.routes import admin, admin_budgets, cache_admin, openai
from gateway.routes import batch as batch_routes
from gateway.routes import cascades as cascade_routes
from gateway.routes import engine as engine_routes
from gateway.routing.build import RoutingPolicies
from gateway.routing.target import RouteTarget
from gateway.settings import Settings
from gateway.spend_control import SpendControl
from gateway.stages.record import Record
from gateway.storage.db import create_engine, create_tables
from gateway.storage.journal import Journal
from gateway.storage.keys import KeyStore
from gateway.storage.ledger import LedgerWriter
from gateway.storage.private import private_dir
from gateway.upstream import DirectTarget
from policies.breaker import Breakers

log = logging.getLogger("costgate")


def admin_key_for(settings: Settings) -> str:
    """The configured admin key, or one generated on first start and kept in the data dir."""
    if settings.admin_key:
        return settings.admin_key
    path = Path(settings.data_dir) / "admin_key"
    if path.exists():
        return path.read_text().strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    key = "sk-cg-admin-" + secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(key + "\n")
    log.warning("no admin key configured: generated one and wrote it to %s", path)
    return key


class Gateway:
    """Everything a request needs, built once per app. Tests build their own."""

    def __init__(self, settings: Settings, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.settings = settings
        private_dir(settings.data_dir)  # 0700: everything below is the gateway's alone
        self.admin_key = admin_key_for(settings)
        self.engine = create_engine(settings.database_url)
        self.keys = KeyStore(self.engine, settings.key_cache_ttl_s)
        self.ledger = LedgerWriter(self.engine, Journal(Path(settings.data_dir) / "journal"),
                                   settings.ledger_flush_interval_s, settings.ledger_batch_size)
        self.metrics = Metrics()
        self.deployments: dict[str, Deployment] = build_deployments(settings.models, transport, settings.data_dir)
        self.breakers = Breakers(settings.breaker)  # one circuit breaker per deployment
        self.targets: dict[str, RouteTarget] = {
            name: DirectTarget(dep, self.deployments, self.metrics, self.breakers)
            for name, dep in self.deployments.items()}
        # cascades and the cost router join self.targets
        self.routing = RoutingPolicies(settings, self.deployments, self.targets, self.breakers, self.engine,
                                       self.ledger, self.metrics, self.metrics.registry)
        self.metrics.label_models(self.targets)  # other names a client sends are labelled `unknown`
        self.spend = SpendControl(settings, self.engine, self.ledger, self.metrics.registry)
        self.cache = build_cache(settings.cache, settings.redis_url, settings.data_dir, self.metrics.registry)
        b = settings.budgets  # streams in flight are journaled, for a crash to charge (gateway/inflight.py)
        self.streams = StreamJournal(Path(settings.data_dir) / "journal", self.deployments,
                                     b.journal_every_chunks, b.journal_every_s)
        self.pipeline = Pipeline(build_stages(StageParts(
            self.keys, self.targets, self.deployments, self.spend, self.cache, self.ledger, self.metrics,
            settings.compression, self.routing.metrics)), on_refusal=self.spend.refusal, streams=self.streams)
        # /v1/files and /v1/batches: the batch lane's worker
        self.batch_lane = BatchRunner(settings.batch, self.engine, settings.data_dir, self.keys, self.pipeline.handle,
                                      self.metrics.registry)
        self.metrics.registry.register(ReplicaCollector(lambda: [d.provider for d in self.deployments.values()]))

    async def start(self) -> None:
        await create_tables(self.engine)
        await self.routing.start()
        await self.ledger.recover()
        await recover_streams(self.streams, self.ledger, self.spend)  # after the rows the ledger journal had
        self.ledger.start()
        self.batch_lane.start()  # picks up the batches a previous run left unfinished
        await self.spend.start()
        await self.cache.start()

    async def stop(self) -> None:
        await self.batch_lane.stop()  # first: its lines still write ledger rows
        await self.spend.stop()
        await self.cache.stop()  # the embedded backend writes its snapshot
        await self.routing.stop()  # shadow calls in flight still write ledger rows
        await self.ledger.close()
        self.streams.close()
        for dep in self.deployments.values():
            await dep.provider.aclose()
        await self.engine.dispose()

    async def record_rejected(self, request_id: str, endpoint: Endpoint, err: GatewayError,
                              principal: Principal) -> GatewayError:
        """A request refused before the pipeline (unreadable body) still gets its ledger row and
        counts against its key's request rate; returns the error to answer with (a 429 once
        the key is over that rate)."""
        ctx = RequestContext(request_id=request_id, endpoint=endpoint, body={}, api_key=None, headers={},
                             principal=principal)
        err = await self.spend.refusal(ctx, err)  # counted against the key's request rate
        ctx.status_code, ctx.error = err.status, err.message
        ctx.finish()
        await Record(self.ledger, self.metrics).settle(ctx)  # the row and metrics the pipeline's would write
        return err


def create_app(settings: Settings, transport: httpx.AsyncBaseTransport | None = None) -> FastAPI:
    gateway = Gateway(settings, transport)

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
    app.router.routes[:0] = openai.hot_routes()  # matched before the FastAPI routes (see there)
    app.include_router(admin.router)
    app.include_router(cache_admin.router)
    app.include_router(cascade_routes.router)
    app.include_router(batch_routes.router)
    app.include_router(admin_budgets.router)
    app.include_router(engine_routes.router)  # GET /admin/engine (issue 6)
    install_dashboard(app)  # /admin/ui: its own session auth, not the admin bearer key
    _add_health_routes(app, gateway)
    _add_error_handlers(app)
    _hoist_schema_defs(app)
    limits = BodyLimits(settings.admin_max_body_bytes, MAX_FORM_BYTES,
                        settings.batch.max_file_bytes + MULTIPART_SLACK, settings.max_body_bytes)
    app.add_middleware(RequestGuard, admin_key=gateway.admin_key, limits=limits, metrics=gateway.metrics,
                       self_capped=frozenset(r.path for r in openai.hot_routes()))
    return app


def _add_health_routes(app: FastAPI, gateway: Gateway) -> None:
    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> dict:
        return {"status": "ok"}

    @app.get("/readyz", include_in_schema=False)
    async def readyz() -> Response:
        try:
            async with gateway.engine.connect() as conn:
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
                return error_response(AuthenticationFailed("/metrics needs the metrics key", code="invalid_metrics_key"))
        return Response(gateway.metrics.render(), media_type="text/plain; version=0.0.4")


def _add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(GatewayError)
    async def gateway_error(_request: Request, err: GatewayError) -> Response:
        return error_response(err)

    @app.exception_handler(HTTPException)
    async def http_error(_request: Request, err: HTTPException) -> Response:
        mapped = GatewayError(str(err.detail), code="not_found" if err.status_code == 404 else "http_error")
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

    @app.exception_handler(Exception)
    async def unexpected(_request: Request, err: Exception) -> Response:
        log.exception("unhandled error", exc_info=err)
        return error_response(GatewayError("internal error in the gateway"))


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
