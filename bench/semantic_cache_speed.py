"""Issue 12 item 4: what the semantic cache costs on the miss path, against exact-only, in one run.

    python bench/semantic_cache_speed.py [qqp_dev.jsonl] [--fill 10000,100000] [--backend embedded,redis]
                                         [--vectors N]
    python bench/semantic_cache_speed.py --recall-only
    python bench/semantic_cache_speed.py --texts-only [--texts 1000]

Speed (needs wrk: `apt-get install -y wrk`). One gateway (`costgate serve`, SQLite ledger) pinned
alone to `--gateway-cpu`; the fast fake upstream (bench/fast_upstream.py) and wrk share
`--load-cpu`. Every request is a question not asked before in its team, at temperature 0:
half of the QQP dev questions and GSM8K problems, shuffled (`bench/wrk_post.lua` cycles through
them; a run ends before it comes round again: the exact hits are printed to show it). Each
measurement is a team of its own in the same gateway: exact-only teams (semantic off), and
semantic teams whose namespace holds `--fill`
stored entries before the run. Fillers are new texts spliced from two random questions of the
other half (the head of one, the tail of the other): like real traffic in vocabulary, rarely a
paraphrase of anything asked, with no MiniLM vectors yet (the worst case for the lazy MiniLM
vectors; `--vectors N`: those the first N questions meet over the static gate come with theirs,
as once earlier lookups have met them). Spliced from the asked questions themselves, each question would meet a dozen
fillers sharing half its words at 100k, all over the gate. Reported: p50
at 1 connection (exact-only, semantic, the difference), requests/s at 32 connections and the
ratio, the gateway's CPU per request, and the semantic hits the runs got.

Recall (in process): the QQP protocol — store the `a`s, ask the `b`s — with the static stage and
index as the gateway runs them: of the queries whose nearest stored question by MiniLM cosine
is at least 0.85, the share for which that question is among the static candidates over the
gate (so the verifier sees the same candidate as a full MiniLM search would show it).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import secrets
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.harness import (  # noqa: E402
    ADMIN_KEY,
    MODEL,
    Processes,
    WrkResult,
    base_env,
    bench_model,
    cpu_ms,
    free_port,
    run_wrk,
    wait_http,
)
from gateway.settings import SemanticCacheConfig  # noqa: E402
from policies.exact_cache import CachedAnswer, request_keys  # noqa: E402
from policies.semantic_cache.distill_static import Pair  # noqa: E402
from policies.semantic_cache.store import EmbeddedStore, Entry, QuestionVectors  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
REDIS_URL = "redis://127.0.0.1:6379/0"
CONNECTIONS = (1, 32)


def questions(qqp: Path) -> list[str]:
    rows = [json.loads(line) for line in qqp.read_text().splitlines()]
    texts = {q for r in rows for q in (r["a"], r["b"])}
    gsm8k = qqp.with_name("gsm8k_dev.jsonl")
    if gsm8k.exists():
        texts |= {json.loads(line)["prompt"] for line in gsm8k.read_text().splitlines()}
    ordered = sorted(texts)
    random.Random(0).shuffle(ordered)
    return ordered


def fillers(texts: list[str], n: int, seed: int) -> list[str]:
    """n distinct splices. (No serial number to make them distinct: a number on every stored
    question made the verifier refuse every one of them outright, and moved their static
    vectors away from any question asked.)"""
    rng = random.Random(seed)
    out: dict[str, None] = {}
    while len(out) < n:
        head, tail = rng.choice(texts).split(), rng.choice(texts).split()
        out[" ".join(head[: max(1, len(head) // 2)] + tail[len(tail) // 2 :])] = None
    return list(out)


def body(question: str) -> dict:
    return {"model": MODEL, "temperature": 0, "messages": [{"role": "user", "content": question}]}


@dataclass(frozen=True)
class Team:
    name: str
    semantic: bool
    fill: int
    connections: int


def teams(fill: list[int]) -> list[Team]:
    """Exact-only and semantic side by side for each fill and connection count; the last is
    the warm-up's."""
    return [
        Team(f"{kind}-{n}-{c}", kind == "semantic", n, c)
        for n in fill
        for c in CONNECTIONS
        for kind in ("exact", "semantic")
    ] + [Team("warm-up", True, 0, 8)]


class Gateway:
    """costgate pinned to one core, with one team (and key) per measurement."""

    def __init__(
        self,
        procs: Processes,
        cpu: int,
        upstream: str,
        backend: str,
        all_teams: list[Team],
        max_false_hit_rate: float | None = None,
    ) -> None:
        self.procs, self.cpu = procs, cpu
        self.workdir = procs.workdir / f"gateway-{backend}"
        self.workdir.mkdir()
        bound = {} if max_false_hit_rate is None else {"max_false_hit_rate": max_false_hit_rate}
        cache: dict = {"max_entries": 10**7, "teams": {t.name: {"semantic": t.semantic, **bound} for t in all_teams}}
        config = {
            "admin_key": ADMIN_KEY,
            "database_url": f"sqlite:///{self.workdir}/costgate.db",
            "data_dir": str(self.workdir / "data"),
            "cache": cache,
            "models": [bench_model(upstream)],
        }
        if backend == "redis":
            self.prefix = f"costgate-bench-{secrets.token_hex(4)}:"
            config["redis_url"] = REDIS_URL
            cache.update({"backend": "redis", "redis_prefix": self.prefix})
        (self.workdir / "config.yaml").write_text(yaml.safe_dump(config))
        self.data_dir = self.workdir / "data"
        self.start()
        admin = {"authorization": f"Bearer {ADMIN_KEY}"}
        self.keys, self.team_ids = {}, {}
        for team in all_teams:
            created = httpx.post(self.url + "/admin/teams", json={"name": team.name}, headers=admin).json()
            self.team_ids[team.name] = created["id"]
            key = httpx.post(self.url + "/admin/keys", json={"team": team.name}, headers=admin)
            key.raise_for_status()
            self.keys[team.name] = key.json()["key"]

    def start(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = self.procs.start(
            f"gateway-{self.port}",
            self.cpu,
            [
                sys.executable,
                "-m",
                "gateway.cli",
                "serve",
                "--config",
                str(self.workdir / "config.yaml"),
                "--port",
                str(self.port),
                "--log-level",
                "warning",
            ],
            {**base_env(), **ONE_THREAD},
            self.workdir,
        )
        wait_http(self.url + "/healthz", self.proc, 1800)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(600)

    def namespace(self, team: Team) -> str:
        return request_keys(self.team_ids[team.name], "chat.completions", body("x")).namespace

    def hits(self) -> dict[str, float]:
        text = httpx.get(self.url + "/metrics", timeout=30).text
        out = {}
        for kind in ("exact", "semantic"):
            found = re.findall(r"^costgate_cache_lookups_total\{([^}]*)\} (\S+)$", text, re.M)
            out[kind] = sum(float(v) for labels, v in found if f'kind="{kind}"' in labels and 'result="hit"' in labels)
        return out


ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def fill_namespaces(
    gw: Gateway, backend: str, plan: list[tuple[str, list[str]]], asked: list[str], with_vectors: int
) -> None:
    """Store the fillers (namespace, texts) where the gateway will find them after a restart;
    with `with_vectors`, those that the first `with_vectors` questions asked meet over the
    static gate come with their MiniLM vectors (as a namespace's entries have them once earlier
    lookups met them: the steady state, where the lazy vectors are made)."""
    import asyncio

    from policies.semantic_cache.embedder import Embedder
    from policies.semantic_cache.index import VectorIndex
    from policies.semantic_cache.static_embedder import StaticEmbedder

    static = StaticEmbedder.load()
    full = Embedder() if with_vectors else None
    asked_static = static.embed_many(asked[:with_vectors])
    now = time.time()
    answer = CachedAnswer("filler", "stop", MODEL, MODEL, 10, 10)

    def entries(namespace: str, texts: list[str]):  # type: ignore[no-untyped-def]
        vectors = static.embed_many(texts)
        made: dict[int, np.ndarray] = {}
        if full is not None:
            index = VectorIndex(static.dim)
            index.add_many([str(k) for k in range(len(texts))], vectors)
            met = sorted(
                {int(k) for q in asked_static for k, c in index.search(q, static.candidates) if c >= static.gate}
            )
            made = dict(zip(met, full.embed_many([texts[k] for k in met]))) if met else {}
            print(
                f"  {len(met):,} fillers met by the first {with_vectors:,} questions: MiniLM vectors made", flush=True
            )
        for k, text in enumerate(texts):
            key = f"fill-{namespace[:8]}-{k}"
            yield (
                Entry(key, "bench", namespace, text, answer, now, now + 86400, last_used=now),
                QuestionVectors(vectors[k], made.get(k)),
            )

    async def fill() -> None:
        if backend == "redis":
            from policies.semantic_cache.redis_store import RedisStore

            store = RedisStore(REDIS_URL, gw.prefix, 10**7)
        else:
            store = EmbeddedStore(10**7)
        for namespace, texts in plan:
            for entry, vectors in entries(namespace, texts):
                await store.put(entry, vectors)
        if backend == "redis":
            await store.redis.aclose()  # type: ignore[attr-defined]
        else:
            store.save(gw.data_dir / "cache")  # type: ignore[attr-defined]

    asyncio.run(fill())


@dataclass(frozen=True)
class Measured:
    wrk: WrkResult
    cpu_us: float  # the gateway's CPU per request
    hits: dict[str, float]


def measure(gw: Gateway, team: Team, bodies: Path, args: argparse.Namespace, warm_up: bool = False) -> Measured:
    before_hits, before_cpu = gw.hits(), cpu_ms(gw.proc.pid)
    result = run_wrk(
        gw.url + "/v1/chat/completions",
        gw.keys[team.name],
        "@" + str(bodies),
        team.connections,
        2 if warm_up else args.duration,
        args.load_cpu,
    )
    if result.errors or result.non2xx:
        raise RuntimeError(f"{result.errors} socket errors, {result.non2xx} non-2xx answers")
    cpu = cpu_ms(gw.proc.pid) - before_cpu
    after = gw.hits()
    return Measured(result, cpu * 1000 / max(result.requests, 1), {k: after[k] - before_hits[k] for k in after})


def speed(backend: str, texts: list[str], sources: list[str], fill: list[int], args: argparse.Namespace) -> None:
    all_teams = teams(fill)
    with tempfile.TemporaryDirectory(prefix="bench-cache-speed-") as tmp:
        procs = Processes(Path(tmp))
        gw: Gateway | None = None
        try:
            port = free_port()
            fake = procs.start(
                "upstream",
                args.load_cpu,
                [sys.executable, str(ROOT / "bench" / "fast_upstream.py"), "--port", str(port)],
                base_env(),
                ROOT,
            )
            wait_http(f"http://127.0.0.1:{port}/v1/models", fake, 30)
            upstream = f"http://127.0.0.1:{port}/v1"
            gw = Gateway(procs, args.gateway_cpu, upstream, backend, all_teams, args.max_false_hit_rate)
            gw.stop()
            plan = [
                (gw.namespace(t), fillers(sources, t.fill, seed=i))
                for i, t in enumerate(all_teams)
                if t.fill and t.semantic
            ]
            started = time.monotonic()
            fill_namespaces(gw, backend, plan, texts, args.vectors)
            gw.start()
            print(
                f"\n{backend}: filled {sum(len(p[1]) for p in plan):,} entries and restarted in "
                f"{time.monotonic() - started:.0f} s; load average {os.getloadavg()[0]:.2f}",
                flush=True,
            )
            bodies = Path(tmp) / "bodies.jsonl"
            bodies.write_text("".join(json.dumps(body(q)) + "\n" for q in texts))
            measure(gw, all_teams[-1], bodies, args, warm_up=True)  # a team of its own: pools, caches
            results = {}
            for team in all_teams[:-1]:
                results[team.name] = measure(gw, team, bodies, args)
                m = results[team.name]
                print(
                    f"  {team.name}: p50 {m.wrk.p50_ms:.3f} ms p99 {m.wrk.p99_ms:.3f} ms, {m.wrk.rps:.0f} req/s, "
                    f"CPU {m.cpu_us:.0f} us/request, hits {m.hits}",
                    flush=True,
                )
            report(backend, fill, results)
        finally:
            procs.stop_all()
            if backend == "redis" and gw is not None:
                clear_redis(gw.prefix)


def clear_redis(prefix: str) -> None:
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    for batch in _chunks(list(client.scan_iter(match=prefix + "*", count=10_000)), 10_000):
        client.delete(*batch)


def _chunks(items: list, n: int):  # type: ignore[no-untyped-def]
    for i in range(0, len(items), n):
        yield items[i : i + n]


def report(backend: str, fill: list[int], results: dict[str, Measured]) -> None:
    print(
        f"\n{backend} backend | p50 @1 exact-only | semantic | added | req/s @32 exact-only | semantic | ratio "
        f"| CPU/request @32 exact-only | semantic | semantic hits @1, @32"
    )
    for n in fill:
        e1, s1 = results[f"exact-{n}-1"], results[f"semantic-{n}-1"]
        e32, s32 = results[f"exact-{n}-32"], results[f"semantic-{n}-32"]
        added, ratio = s1.wrk.p50_ms - e1.wrk.p50_ms, s32.wrk.rps / e32.wrk.rps
        print(
            f"{n:,} entries | {e1.wrk.p50_ms:.2f} ms | {s1.wrk.p50_ms:.2f} ms | {added:+.2f} ms "
            f"({'met' if added <= 3 else 'NOT met'}) | {e32.wrk.rps:.0f} | {s32.wrk.rps:.0f} | {ratio:.0%} "
            f"({'met' if ratio >= 0.3 else 'NOT met'}) | {e32.cpu_us:.0f} us | {s32.cpu_us:.0f} us "
            f"| {s1.hits['semantic']:.0f}, {s32.hits['semantic']:.0f}"
        )


def recall(qqp: Path, fill: int) -> None:
    """The static stage against a full MiniLM search, on the held-out pairs and on all of them."""
    from policies.semantic_cache.embedder import Embedder
    from policies.semantic_cache.index import VectorIndex
    from policies.semantic_cache.static_embedder import StaticEmbedder

    rows = [json.loads(line) for line in qqp.read_text().splitlines()]
    pairs = [Pair(r["a"], r["b"]) for r in rows]
    static, full = StaticEmbedder.load(), Embedder()
    heldout = [p for p in pairs if p.held_out]
    extra = fillers(questions(qqp), fill, seed=99)
    extra_static, extra_full = static.embed_many(extra), full.embed_many(extra)
    print(
        f"\nRecall of the static stage (gate {static.gate:.3f}, {static.candidates} candidates), "
        "on the held-out pairs (the table's rows were fitted on the others; the gate was chosen here):\n\n"
        "| stored | queries | nearest >= 0.85 | "
        f"found | queries that ran MiniLM | MiniLM texts per query |\n|---|---|---|---|---|---|"
    )
    for label, stored, asked, with_fill in (
        ("their a", heldout, heldout, False),
        ("every a", pairs, heldout, False),
        (f"every a + {fill:,} fillers", pairs, heldout, True),
    ):
        a_static, a_full = static.embed_many([p.a for p in stored]), full.embed_many([p.a for p in stored])
        if with_fill:
            a_static, a_full = np.vstack([a_static, extra_static]), np.vstack([a_full, extra_full])
        b_static, b_full = static.embed_many([p.b for p in asked]), full.embed_many([p.b for p in asked])
        index = VectorIndex(static.dim)
        index.add_many([str(i) for i in range(len(a_static))], a_static)
        cosine = b_full @ a_full.T
        nearest, close = cosine.argmax(axis=1), cosine.max(axis=1) >= 0.85
        found = ran = texts = 0
        for q in range(len(asked)):
            kept = [int(k) for k, c in index.search(b_static[q], static.candidates) if c >= static.gate]
            ran += bool(kept)
            texts += (1 + len(kept)) if kept else 0
            found += close[q] and int(nearest[q]) in kept
        print(
            f"| {label} ({len(a_static):,}) | {label_of(asked)} | {close.sum()} | {found / close.sum():.2%} | "
            f"{ran / len(asked):.1%} | {texts / len(asked):.2f} |"
        )


def served_recall(qqp: Path, rates: list[float]) -> None:
    """The hits the gate line can lose: every `a` stored, each held-out `b` asked, the verifier
    at each bound judging (1) the nearest stored question by MiniLM over the whole store, and
    (2) what the gateway's two-stage search with the verifier as judge finds. Hits of (1) that
    (2) misses are what the static stage costs; the gate line was fitted on these pairs, so the
    halves (fitted on one, counted on the other) are in policies/semantic_cache/distill_static.py."""
    import asyncio

    from policies.semantic_cache.differences import Parsed
    from policies.semantic_cache.embedder import Embedder
    from policies.semantic_cache.search import TwoStageSearch
    from policies.semantic_cache.static_embedder import StaticEmbedder
    from policies.semantic_cache.verifier import Verifier

    rows = [json.loads(line) for line in qqp.read_text().splitlines()]
    pairs = [Pair(r["a"], r["b"]) for r in rows]
    asked = [p.b for p in pairs if p.held_out]
    stored = list(dict.fromkeys(p.a for p in pairs))
    static, verifier, embedder = StaticEmbedder.load(), Verifier.load(), Embedder()
    vectors = dict(zip(stored + asked, embedder.embed_many(stored + asked)))
    a_full = np.stack([vectors[q] for q in stored])
    answer = CachedAnswer("a", "stop", MODEL, MODEL, 10, 10)
    parsed = {q: Parsed.of(q) for q in stored + asked}

    class Judge:
        def __init__(self, question: str, rate: float) -> None:
            self.query, self.rate = parsed[question], rate

        def least_needed(self) -> float | None:
            return verifier.least_cosine_needed(self.rate)

        def needed(self, entry: Entry) -> float | None:
            return verifier.cosine_needed(self.query, parsed[entry.question], self.rate)

        def accepts(self, entry: Entry, cosine: float) -> bool:
            return verifier.accepts(self.query, parsed[entry.question], cosine, self.rate)

    async def count(rate: float) -> tuple[int, int, int, float]:
        passes = [0]

        async def full(batch: list[str]) -> np.ndarray:
            passes[0] += len(batch)
            return np.stack([vectors[q] for q in batch])

        search, store = TwoStageSearch(static, full), EmbeddedStore(10**7)
        for k, text in enumerate(stored):
            await store.put(Entry(str(k), "bench", "ns", text, answer, 0, 1e12), search.vectors(text))
        whole = staged = lost = 0
        for question in asked:
            cosines = a_full @ vectors[question]
            best = int(np.argmax(cosines))
            judge = Judge(question, rate)
            hit = judge.accepts(Entry(str(best), "bench", "ns", stored[best], answer, 0, 1e12), float(cosines[best]))
            found = await search.nearest(store, "ns", question, search.vectors(question), 1.0, judge)
            whole, staged, lost = whole + hit, staged + (found is not None), lost + (hit and found is None)
        return whole, staged, lost, passes[0] / len(asked)

    print(
        f"\nHits lost to the static stage ({len(stored):,} stored a, {len(asked):,} held-out b asked, in process):"
        "\n\n| max_false_hit_rate | hits, MiniLM over the whole store | hits, two-stage search | of those lost "
        "| MiniLM texts per question |\n|---|---|---|---|---|"
    )
    for rate in rates:
        whole, staged, lost, texts = asyncio.run(count(rate))
        print(f"| {rate} | {whole} | {staged} | {lost} ({lost / max(whole, 1):.1%}) | {texts:.2f} |", flush=True)


def minilm_texts(qqp: Path, fill: list[int], n: int, rates: list[float]) -> None:
    """MiniLM texts per question, counted in process (no timing, so the load does not move it):
    the speed runs' first `n` questions against their fillers, through the gateway's two-stage
    search, with the verifier judging the candidates first (as the gateway runs it) and without
    (every candidate over the gate embedded, then the nearest judged). The hits must agree."""
    import asyncio

    from policies.semantic_cache.differences import Parsed
    from policies.semantic_cache.embedder import Embedder
    from policies.semantic_cache.search import TwoStageSearch
    from policies.semantic_cache.static_embedder import StaticEmbedder
    from policies.semantic_cache.verifier import Verifier

    texts = questions(qqp)
    asked, sources = texts[0::2][:n], texts[1::2]
    static, verifier, embedder = StaticEmbedder.load(), Verifier.load(), Embedder()
    answer = CachedAnswer("filler", "stop", MODEL, MODEL, 10, 10)

    class Judge:
        def __init__(self, question: str, rate: float) -> None:
            self.query, self.rate = Parsed.of(question), rate

        def least_needed(self) -> float | None:
            return verifier.least_cosine_needed(self.rate)

        def needed(self, entry: Entry) -> float | None:
            return verifier.cosine_needed(self.query, Parsed.of(entry.question), self.rate)

        def accepts(self, entry: Entry, cosine: float) -> bool:
            return verifier.accepts(self.query, Parsed.of(entry.question), cosine, self.rate)

    async def count(size: int, rate: float, judged: bool) -> tuple[float, float, int]:
        made = [0]

        async def full(batch: list[str]) -> np.ndarray:
            made[0] += len(batch)
            return embedder.embed_many(batch)

        search, store = TwoStageSearch(static, full), EmbeddedStore(10**7)
        filler = fillers(sources, size, seed=0)
        for k, (text, vector) in enumerate(zip(filler, static.embed_many(filler))):
            await store.put(Entry(str(k), "bench", "ns", text, answer, 0, 1e12), QuestionVectors(vector))
        hits = ran = 0
        for question in asked:
            before, judge = made[0], Judge(question, rate)
            found = await search.nearest(
                store, "ns", question, search.vectors(question), 1.0, judge if judged else None
            )
            if found is not None and not judged and not judge.accepts(found.entry, found.cosine):
                found = None
            hits, ran = hits + (found is not None), ran + (made[0] > before)
        return ran / len(asked), made[0] / len(asked), hits

    print(
        f"\nMiniLM texts per question ({len(asked):,} new questions, in process; stored fillers without MiniLM "
        "vectors: each candidate's is made once, then kept):\n\n| stored | max_false_hit_rate | questions that ran "
        "MiniLM, every candidate / verify first | texts per question | hits |\n|---|---|---|---|---|"
    )
    for size in fill:
        for rate in rates:
            every = asyncio.run(count(size, rate, judged=False))
            first = asyncio.run(count(size, rate, judged=True))
            same = "same" if every[2] == first[2] else f"{every[2] - first[2]:+d} by the gate line"
            print(
                f"| {size:,} | {rate} | {every[0]:.1%} / {first[0]:.1%} | {every[1]:.2f} / {first[1]:.2f} "
                f"| {every[2]} / {first[2]} ({same}) |",
                flush=True,
            )


def label_of(asked: list[Pair]) -> str:
    return f"held-out b ({len(asked):,})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="?", type=Path, default=DATA / "qqp_dev.jsonl")
    parser.add_argument("--fill", default="10000,100000", help="stored entries in the semantic teams' namespace")
    parser.add_argument("--backend", default="embedded,redis")
    parser.add_argument(
        "--duration",
        type=int,
        default=3,
        help="seconds per wrk run (8,000 questions: ~2,400 req/s exact-only would wrap past 3 s)",
    )
    parser.add_argument(
        "--vectors",
        type=int,
        default=0,
        help="fillers met by the first N questions come with MiniLM vectors (steady state; 0: none, the worst case)",
    )
    parser.add_argument(
        "--max-false-hit-rate",
        type=float,
        default=None,
        help="the semantic teams' bound (default: the product's, as a team that sets none gets)",
    )
    parser.add_argument("--gateway-cpu", type=int, default=0)
    parser.add_argument("--load-cpu", type=int, default=1)
    parser.add_argument("--recall-only", action="store_true")
    parser.add_argument("--texts-only", action="store_true", help="only the MiniLM texts per question, in process")
    parser.add_argument("--texts", type=int, default=1000, help="questions for the MiniLM count (0: skip it)")
    parser.add_argument("--recall-fill", type=int, default=10_000, help="fillers added to the recall run's store")
    args = parser.parse_args()
    fill = [int(n) for n in args.fill.split(",") if n]
    if not (args.recall_only or args.texts_only):
        texts = questions(args.data)
        bound = args.max_false_hit_rate or SemanticCacheConfig().max_false_hit_rate
        print(
            f"{len(texts):,} distinct questions; semantic teams at max_false_hit_rate {bound}; "
            f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"
        )
        for backend in args.backend.split(","):
            speed(backend, texts[0::2], texts[1::2], fill, args)
    if args.texts and not args.recall_only:
        minilm_texts(args.data, fill, args.texts, [0.25, SemanticCacheConfig().max_false_hit_rate])
    if not args.texts_only:
        recall(args.data, args.recall_fill)
        served_recall(args.data, [SemanticCacheConfig().max_false_hit_rate, 0.25])
    print(f"\nload average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
