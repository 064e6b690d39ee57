"""The response cache the two cache stages share: settings -> per-team policy, the store, the
embedder and the verifier, built once by the gateway.

`lookup_exact` / `lookup_semantic` find a servable entry; `store` keeps an answer. Lookups
that fail on the backend (Redis down) count as misses: a cache outage costs money, not
answers.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import sys
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from gateway.caching.minilm import MiniLM
from gateway.config.settings import CacheConfig
from policies.exact_cache import CachedAnswer, CachePolicy, RequestKeys
from policies.semantic_cache.differences import Parsed
from policies.semantic_cache.search import TwoStageSearch, VerifierJudge
from policies.semantic_cache.served import ServedHit
from policies.semantic_cache.store import CacheStore, EmbeddedStore, Entry, QuestionVectors
from policies.semantic_cache.verifier import SHIPPED, Verifier

log = logging.getLogger("costgate.cache")
VERIFIER_CHECK_S = 5.0  # how often a verifier file is looked at for changes, at most
DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
UNIT_S = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
LOOKUP_BUCKETS = (
    0.00025,
    0.0005,
    0.00075,
    0.001,
    0.0015,
    0.002,
    0.003,
    0.004,
    0.005,
    0.0075,
    0.01,
    0.015,
    0.02,
    0.05,
    0.1,
)


def backend_errors(*also: type[Exception]) -> tuple[type[Exception], ...]:
    """What a store raises when its backend is away: OSError, and redis-py's errors once the
    Redis backend is in use, and `also`. Read when an error is caught (`except
    backend_errors()`), so a gateway on SQLite and memory never imports redis (with FAISS and
    onnxruntime, 0.27 s of every start: bench/serve_start.py)."""
    redis = sys.modules.get("redis.exceptions")
    return (OSError, *also) if redis is None else (OSError, redis.RedisError, *also)


# Stored questions' parses kept for the verifier, least recently used out first. A parse is
# ~4.6 KB (tokens, content words, compounds as Python strings in frozensets): at 50,000 the memo
# alone was 2.3 KB a question at 100k stored (bench/cache_memory.py). 8,192 hold the questions
# lookups keep meeting (~38 MB at most, whatever the cache's size); one met again after it fell
# out is parsed again (~0.1 ms).
PARSE_MEMO = 8_192


def parse_duration(text: str) -> float:
    """'7d', '12h', '30m', '45s' or plain seconds -> seconds."""
    match = DURATION.match(str(text))
    if match is None:
        raise ValueError(f"not a duration: {text!r} (use e.g. 7d, 12h, 30m, 45s)")
    return float(match.group(1)) * UNIT_S[match.group(2)]


def policies_from(config: CacheConfig) -> tuple[CachePolicy, dict[str, CachePolicy]]:
    base = CachePolicy(
        exact=config.exact.enabled,
        semantic=config.semantic.enabled,
        max_false_hit_rate=config.semantic.max_false_hit_rate,
        max_temperature=config.max_temperature,
        ttl_s=parse_duration(config.ttl),
    )
    teams = {}
    for name, t in config.teams.items():
        teams[name] = CachePolicy(
            exact=base.exact if t.exact is None else t.exact,
            semantic=base.semantic if t.semantic is None else t.semantic,
            max_false_hit_rate=base.max_false_hit_rate if t.max_false_hit_rate is None else t.max_false_hit_rate,
            max_temperature=base.max_temperature if t.max_temperature is None else t.max_temperature,
            ttl_s=base.ttl_s if t.ttl is None else parse_duration(t.ttl),
            verifier=t.verifier,
        )
    return base, teams


class CacheMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.lookups = Counter(
            "costgate_cache_lookups",
            "Cache lookups by result (hit rate = hit / all)",
            ["team", "kind", "result"],
            registry=registry,
        )
        self.saved = Counter(
            "costgate_cache_saved_usd", "Dollars the cache's hits avoided", ["team", "kind"], registry=registry
        )
        self.lookup_seconds = Histogram(
            "costgate_cache_lookup_seconds",
            "Semantic lookup time: index search, entry fetch, verifier",
            buckets=LOOKUP_BUCKETS,
            registry=registry,
        )
        self.embed_seconds = Histogram(
            "costgate_cache_embed_seconds",
            "Embedding one question (static vector)",
            buckets=LOOKUP_BUCKETS,
            registry=registry,
        )
        self.stores = Counter("costgate_cache_stores", "Answers written to the cache", ["team"], registry=registry)
        self.entries = Gauge("costgate_cache_entries", "Entries in the cache (this replica's view)", registry=registry)
        self.reported_false_hits = Counter(
            "costgate_cache_reported_false_hits",
            "Cache hits the team reported wrong (POST /v1/feedback)",
            ["team", "kind"],
            registry=registry,
        )


@dataclass
class SemanticHit:
    entry: Entry
    cosine: float


@dataclass
class ResponseCache:
    config: CacheConfig
    store: CacheStore
    metrics: CacheMetrics
    verifier_path: Path = SHIPPED
    backend: Literal["embedded", "redis"] = "embedded"  # as resolved from the config and redis_url
    base: CachePolicy = field(init=False)
    teams: dict[str, CachePolicy] = field(init=False)
    feedback_window_s: float = field(init=False)
    _search: TwoStageSearch | None = field(default=None, init=False)
    minilm: MiniLM = field(default_factory=MiniLM)  # shared with the cascades (gateway/service.py)
    _verifiers: dict[str, _LoadedVerifier] = field(default_factory=dict, init=False)  # by file
    clock: Callable[[], float] = time.monotonic  # when to look at the verifier files again
    _parse: Callable[[str], Parsed] = field(
        default_factory=lambda: functools.lru_cache(maxsize=PARSE_MEMO)(Parsed.of), init=False
    )

    def __post_init__(self) -> None:
        self.base, self.teams = policies_from(self.config)
        self.feedback_window_s = parse_duration(self.config.feedback_window)

    @property
    def semantic_anywhere(self) -> bool:
        return self.base.semantic or any(p.semantic for p in self.teams.values())

    async def start(self) -> None:
        await self.store.start()
        if self.semantic_anywhere:  # load the model and verifiers now, not on the first request
            self._searcher()
            for policy in (self.base, *self.teams.values()):
                if policy.semantic:
                    self.verifier_for(policy)
        self.metrics.entries.set(await self.store.count())

    async def stop(self) -> None:
        await self.store.stop()
        self.minilm.close()  # after the cascades have stopped (Gateway.stop)

    def policy_for(self, team_name: str) -> CachePolicy:
        return self.teams.get(team_name, self.base)

    def _searcher(self) -> TwoStageSearch:
        if self._search is None:
            from policies.semantic_cache.static_embedder import StaticEmbedder

            self.minilm.load()
            self._search = TwoStageSearch(StaticEmbedder.load(), self.minilm.embed_many)
        return self._search

    async def embed(self, text: str) -> QuestionVectors:
        return self._searcher().vectors(text)

    async def lookup_exact(self, keys: RequestKeys) -> Entry | None:
        try:
            return await self.store.get(keys.key, time.time())
        except backend_errors() as err:
            log.warning("cache lookup failed (served as a miss): %s", err)
            return None

    async def lookup_semantic(
        self, keys: RequestKeys, vectors: QuestionVectors, policy: CachePolicy
    ) -> SemanticHit | None:
        started = time.perf_counter()
        now = time.time()
        judge = _Judge(
            self.verifier_for(policy),
            keys.question,
            policy.max_false_hit_rate,
            self._parse,
            now,
            parse_duration(self.config.semantic.ttl),
        )
        try:
            nearest = await self._searcher().nearest(self.store, keys.namespace, keys.question, vectors, now, judge)
        except backend_errors() as err:
            log.warning("cache lookup failed (served as a miss): %s", err)
            return None
        self.metrics.lookup_seconds.observe(time.perf_counter() - started)
        return None if nearest is None else SemanticHit(nearest.entry, nearest.cosine)

    def verifier_for(self, policy: CachePolicy) -> Verifier:
        """The team's verifier, reloaded when its file changes on disk (`costgate cache
        calibrate` rewrites it whole), looked at once every VERIFIER_CHECK_S at most. A file
        that cannot be read back keeps the verifier loaded before, with a warning."""
        path = str(policy.verifier or self.verifier_path)
        now = self.clock()
        loaded = self._verifiers.get(path)
        if loaded is not None and now - loaded.checked_at < VERIFIER_CHECK_S:
            return loaded.verifier
        try:
            changed = os.stat(path).st_mtime_ns
        except OSError:
            changed = None
        if loaded is not None and (changed is None or changed == loaded.changed):
            loaded.checked_at = now
            return loaded.verifier
        try:
            verifier = Verifier.load(Path(path))
        except (OSError, ValueError, KeyError, zipfile.BadZipFile) as err:
            if loaded is None:
                raise
            log.warning("cache verifier %s changed but cannot be read (%s): the one loaded stays", path, err)
            loaded.checked_at = now
            return loaded.verifier
        if loaded is not None:
            log.info("cache verifier %s changed on disk: reloaded", path)
        self._verifiers[path] = _LoadedVerifier(verifier, changed, now)
        return verifier

    def served_record(
        self, request_id: str, entry: Entry, policy: CachePolicy, query: str | None = None, cosine: float | None = None
    ) -> ServedHit | None:
        """What a hit served, for feedback (policies/semantic_cache/served.py); None when the
        feedback window is 0. `query` only for a semantic hit whose request allows storing."""
        window = min(self.feedback_window_s, policy.ttl_s)
        if window <= 0:
            return None
        semantic = cosine is not None
        return ServedHit(
            request_id,
            entry.team_id,
            "semantic" if semantic else "exact",
            entry.key,
            entry.created_at,
            time.time() + window,
            query,
            entry.question if semantic else None,
            cosine,
        )

    async def record_hit(self, entry: Entry, served: ServedHit | None = None) -> None:
        try:
            await self.store.record_hit(entry, time.time(), served)
        except backend_errors() as err:
            log.warning("cache hit not recorded: %s", err)

    async def served_hit(self, request_id: str) -> ServedHit | None:
        """What the hit of this request served, while its record lasts (backend errors raise)."""
        return await self.store.served(request_id, time.time())

    async def remove(self, hit: ServedHit) -> bool:
        """Purge the entry that served this hit (not one stored under its key since)."""
        removed = await self.store.remove(hit.entry_key, hit.team_id, hit.entry_created_at)
        if removed:
            self.metrics.entries.set(await self.store.count())
        return removed

    async def store_answer(
        self,
        keys: RequestKeys,
        team_id: str,
        team_name: str,
        answer: CachedAnswer,
        policy: CachePolicy,
        vector: QuestionVectors | None,
    ) -> None:
        now = time.time()
        if vector is None and policy.semantic and keys.question:
            vector = await self.embed(keys.question)
        entry = Entry(keys.key, team_id, keys.namespace, keys.question, answer, now, now + policy.ttl_s, last_used=now)
        count = await self.store.put(entry, vector if policy.semantic and keys.question else None)
        self.metrics.stores.labels(team_name).inc()
        self.metrics.entries.set(count)  # from the put: no second round trip to Redis per answer

    async def purge(self, team_id: str | None) -> int:
        removed = await self.store.purge(team_id)
        self.metrics.entries.set(await self.store.count())
        return removed


@dataclass
class _LoadedVerifier:
    verifier: Verifier
    changed: int | None  # the file's mtime (ns) when loaded
    checked_at: float  # when the file was last looked at (ResponseCache.clock)


class _Judge(VerifierJudge):
    """The team's verifier for one query: an entry older than the semantic TTL is never served;
    else the verifier decides."""

    def __init__(
        self,
        verifier: Verifier,
        question: str,
        max_false_hit_rate: float,
        parse: Callable[[str], Parsed],
        now: float,
        ttl_s: float,  # cache.semantic.ttl: the oldest entry the semantic cache may serve
    ) -> None:
        super().__init__(verifier, question, max_false_hit_rate, parse)
        self.now, self.ttl_s = now, ttl_s

    def needed(self, entry: Entry) -> float | None:
        return super().needed(entry) if entry.created_at + self.ttl_s > self.now else None

    def accepts(self, entry: Entry, cosine: float) -> bool:
        return entry.created_at + self.ttl_s > self.now and super().accepts(entry, cosine)


def backend_of(config: CacheConfig, redis_url: str | None) -> Literal["embedded", "redis"]:
    """Replicas given a Redis share their cache unless the config keeps it per replica."""
    if config.backend == "auto":
        return "redis" if redis_url else "embedded"
    if config.backend == "redis" and not redis_url:
        raise ValueError("cache.backend is redis but no redis_url is configured")
    return config.backend


def build_cache(
    config: CacheConfig,
    redis_url: str | None,
    data_dir: str,
    registry: CollectorRegistry,
    minilm: MiniLM | None = None,
) -> ResponseCache:
    store: CacheStore
    backend = backend_of(config, redis_url)
    if backend == "redis":
        from policies.semantic_cache.redis_store import RedisStore

        store = RedisStore(str(redis_url), config.redis_prefix, config.max_entries)
    else:
        store = EmbeddedStore(config.max_entries, Path(data_dir) / "cache")
    verifier = Path(config.verifier) if config.verifier else SHIPPED
    return ResponseCache(config, store, CacheMetrics(registry), verifier, backend, minilm or MiniLM())
