"""The gateway's parts, built once: `build_gateway(settings)` makes every stateful object and
wires them explicitly; the `Gateway` it returns is a plain value the app hangs on `app.state`
and the routes read. Nothing below the app imports this module."""

from __future__ import annotations

import logging
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine
from starlette.applications import Starlette
from starlette.requests import HTTPConnection

from gateway.batch.runner import BatchRunner
from gateway.caching.minilm import MiniLM
from gateway.caching.response_cache import ResponseCache, build_cache
from gateway.config.settings import BatchConfig, Settings, admin_key_file
from gateway.metrics import Metrics
from gateway.pipeline import Pipeline, SideLane, StageParts, build_stages
from gateway.providers.batch_api import ProviderBatcher
from gateway.providers.local import LocalProvider
from gateway.providers.replicas import ReplicaCollector
from gateway.routing.build import RoutingPolicies
from gateway.routing.direct import DirectTarget
from gateway.routing.guarded_call import Upstream
from gateway.routing.target import RouteTarget
from gateway.spend.spend_control import SpendControl
from gateway.stages.keep_text import KeepText
from gateway.storage.db import create_engine, create_tables
from gateway.storage.distill_texts import Retention, TextStore
from gateway.storage.journal import Journal
from gateway.storage.keys import KeyStore
from gateway.storage.ledger import LedgerWriter
from gateway.storage.private import private_dir
from gateway.storage.provider_batches import ProviderBatchStore
from gateway.storage.stored_responses import ResponseStore
from gateway.storage.verdict_store import FeedbackStore
from gateway.upstream.deployments import Deployment, build_deployments
from gateway.upstream.inflight import StreamJournal, recover_streams
from gateway.upstream.tracing import Tracing, build_tracing
from gateway.verdicts import Feedback
from policies.breaker import Breakers

log = logging.getLogger("costgate")


def admin_key_for(settings: Settings) -> str:
    """The configured admin key, or one generated on first start and kept in the data dir."""
    if settings.admin_key:
        return settings.admin_key
    path = admin_key_file(settings.data_dir)
    if path.exists():
        return path.read_text().strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    key = "sk-cg-admin-" + secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(key + "\n")
    log.warning("no admin key configured: generated one and wrote it to %s", path)
    return key


@dataclass(frozen=True)
class Gateway:
    """Everything a request needs. Tests build their own with `build_gateway`."""

    settings: Settings
    admin_key: str
    db: AsyncEngine  # the SQL database (ledger, keys, budgets); not the local model engine
    keys: KeyStore
    ledger: LedgerWriter
    metrics: Metrics
    deployments: dict[str, Deployment]
    breakers: Breakers
    targets: Mapping[str, RouteTarget]  # every model name a client may ask for; built once, never changed
    routing: RoutingPolicies
    spend: SpendControl
    cache: ResponseCache
    streams: StreamJournal
    pipeline: Pipeline
    batch_lane: BatchRunner
    responses: ResponseStore  # the Responses API's stored responses, per team
    feedback: Feedback  # verdicts on served answers (POST /v1/feedback)
    # Deletes kept text past its team's keep_text_days.
    text_retention: Retention
    texts: TextStore | None = None  # kept request text, when a team opts in (`costgate distill export`)
    tracing: Tracing | None = None  # spans over OTLP, when OTEL_* asks (gateway/upstream/tracing.py)

    async def start(self) -> None:
        await create_tables(self.db)  # every store's tables, migrated under a lock (gateway/storage/migrate.py)
        await self.text_retention.start()
        await self.routing.start()
        await self.ledger.recover()
        await recover_streams(self.streams, self.ledger, self.spend)  # after the rows the ledger journal had
        self.ledger.start()
        self.batch_lane.start()  # picks up the batches a previous run left unfinished
        await self.spend.start()
        self.streams.start(self.ledger, self.spend)  # charges the streams of replicas that died
        await self.cache.start()
        starting = []
        for dep in self.deployments.values():  # local engines start now: the first request need not wait
            if isinstance(dep.provider, LocalProvider) and dep.provider.start_at_serve():
                starting.append(dep.provider)
        log.info("%s", ready_line(list(self.targets), starting))

    async def stop(self) -> None:
        await self.batch_lane.stop()  # first: its lines still write ledger rows
        for dep in self.deployments.values():
            if dep.batcher is not None:  # what its provider still works on is polled again at the next start
                await dep.batcher.aclose()
        await self.routing.stop()  # shadow samples in flight still hold budgets and write rows
        if self.texts is not None:
            await self.texts.drain()  # the text of the last requests and shadow samples
        await self.text_retention.stop()
        await self.spend.stop()
        await self.cache.stop()  # the embedded backend writes its snapshot
        await self.ledger.close()
        self.streams.close()
        for dep in self.deployments.values():
            await dep.provider.aclose()
        await self.db.dispose()
        if self.tracing is not None:
            self.tracing.shutdown()  # the last spans go out


def served_gateway(app: Starlette) -> Gateway:
    """The Gateway `create_app` serves, as its type (routes and the dashboard read it here, so
    mypy and the import contracts see the dependency that `app.state` would hide)."""
    gateway = app.state.gateway
    assert isinstance(gateway, Gateway)
    return gateway


def gateway_of(request: HTTPConnection) -> Gateway:
    """The Gateway serving this request."""
    return served_gateway(request.app)


def ready_line(models: list[str], starting: list[LocalProvider]) -> str:
    """The console's line that says the gateway serves, and what is still starting."""
    line = f"costgate ready: serving {', '.join(models) or 'no models'}"
    for provider in starting:
        expected = provider.replica.expected_start_remaining()
        about = f"about {expected:.0f} s; " if expected is not None else ""
        line += (
            f"; the local engine for {provider.name} is starting ({about}requests to it wait for it, "
            "or get a 503 with retry-after)"
        )
    return line


def kept_texts(settings: Settings, db: AsyncEngine) -> tuple[TextStore | None, KeepText | None]:
    """The store and stage that keep opted-in teams' cascade text; none when no team opts in."""
    teams = settings.keep_text_teams()
    if not teams or not settings.cascades:
        return None, None
    texts = TextStore(db)
    return texts, KeepText(texts, {c.name: c.tiers[-1] for c in settings.cascades}, teams)


def with_batch_apis(
    deployments: dict[str, Deployment],
    store: ProviderBatchStore,
    config: BatchConfig,
    transport: httpx.AsyncBaseTransport | None,
) -> dict[str, Deployment]:
    """Each deployment whose config resolves `batch_api` on gets its provider's Batch API."""
    out = {}
    for name, dep in deployments.items():
        c = dep.config
        if c.batch_api and dep.price.batch is None:
            raise ValueError(f"model {name!r}: batch_api needs a batch price (litellm's map or price.batch)")
        if c.uses_batch_api and c.api_base and dep.price.batch is not None:  # on by default only where priced
            batcher = ProviderBatcher(
                name,
                c.api_base,
                c.api_key,
                store,
                transport=transport,
                poll_s=config.provider_poll_s,
                gather_s=config.provider_gather_s,
            )
            dep = replace(dep, batcher=batcher)
        out[name] = dep
    return out


def build_gateway(settings: Settings, transport: httpx.AsyncBaseTransport | None = None) -> Gateway:
    private_dir(settings.data_dir)  # 0700: everything below is the gateway's alone
    db = create_engine(settings.database_url)
    keys = KeyStore(db, settings.key_cache_ttl_s)
    ledger = LedgerWriter(
        db, Journal(Path(settings.data_dir) / "journal"), settings.ledger_flush_interval_s, settings.ledger_batch_size
    )
    metrics = Metrics()
    deployments = build_deployments(
        settings.models, transport, settings.data_dir, settings.teams, settings.prompt_cache.share_across_teams
    )
    deployments = with_batch_apis(deployments, ProviderBatchStore(db), settings.batch, transport)
    breakers = Breakers(settings.breaker)  # one circuit breaker per deployment
    direct: dict[str, RouteTarget] = {
        name: DirectTarget(dep, deployments, metrics, breakers) for name, dep in deployments.items()
    }
    spend = SpendControl(settings, db, ledger, metrics.registry)
    texts, keep_text = kept_texts(settings, db)
    side_lane = SideLane(ledger, metrics, spend, keep_text)  # shadow samples: held and recorded
    minilm = MiniLM()  # the semantic cache's second stage and the cascades' query topics: one model
    routing = RoutingPolicies(settings, deployments, direct, breakers, db, side_lane, metrics, minilm)
    targets = MappingProxyType({**direct, **routing.targets})  # every name a client may ask for, once
    metrics.label_models(targets)  # other names a client sends are labelled `unknown`
    cache = build_cache(settings.cache, settings.redis_url, settings.data_dir, metrics.registry, minilm)
    b = settings.budgets  # streams in flight are journaled, for a crash to charge (gateway/upstream/inflight.py)
    streams = StreamJournal(
        Path(settings.data_dir) / "journal",
        deployments,
        b.journal_every_chunks,
        b.journal_every_s,
        checkpoints=spend.store,  # where the other replicas see a stream's progress
    )
    tracing = build_tracing(os.environ)
    stages = build_stages(
        StageParts(
            keys,
            targets,
            deployments,
            spend,
            cache,
            ledger,
            metrics,
            settings.compression,
            routing.metrics,
            Upstream(breakers, metrics),
            keep_text,
            tracing,
        )
    )
    settled = routing.settled if routing.cascades else None  # with no cascade, nothing to tell
    pipeline = Pipeline(stages, on_refusal=spend.refusal, streams=streams, settled=settled)
    batch_lane = BatchRunner(
        settings.batch,
        db,
        settings.data_dir,
        keys,
        pipeline.handle,
        metrics.registry,
        [d.batcher for d in deployments.values() if d.batcher is not None],
    )
    metrics.registry.register(ReplicaCollector(lambda: [d.provider for d in deployments.values()]))
    feedback = Feedback(FeedbackStore(db), cache, ledger, keys)
    return Gateway(
        settings,
        admin_key_for(settings),
        db,
        keys,
        ledger,
        metrics,
        deployments,
        breakers,
        targets,
        routing,
        spend,
        cache,
        streams,
        pipeline,
        batch_lane,
        ResponseStore(db, settings.responses),
        feedback,
        Retention(texts or TextStore(db), settings.keep_text_days()),
        texts,
        tracing,
    )
