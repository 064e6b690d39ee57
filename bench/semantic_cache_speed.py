"""Issue 12 item 4: what the semantic cache costs on the miss path, against exact-only, in one run.

    python bench/semantic_cache_speed.py [qqp_dev.jsonl] [--fill 10000,100000] [--backend embedded,redis]
                                         [--vectors N]
    python bench/semantic_cache_speed.py --recall-only
    python bench/semantic_cache_speed.py --texts-only [--texts 1000]
    python bench/semantic_cache_speed.py --cpu-only [--fill 100000] [--texts 1000]

Speed (needs wrk: `apt-get install -y wrk`). One gateway (`costgate serve`, SQLite ledger) pinned
alone to `--gateway-cpu`; the fast fake upstream (bench/fast_upstream.py) and wrk share
`--load-cpu`. Every request is a question not asked before in its team, at temperature 0:
half of the QQP dev questions and GSM8K problems, shuffled, then 40,000 splices of them (an
exact-only run passes the ~8k questions in 3 s on a fast core; `bench/wrk_post.lua` cycles
through them, and a run ends before it comes round again: the exact hits are printed to show it). Each
measurement is a team of its own in the same gateway: exact-only teams (semantic off), and
semantic teams whose namespace holds `--fill`
stored entries before the run. Fillers are new texts spliced from two random questions of the
other half (the head of one, the tail of the other): like real traffic in vocabulary, rarely a
paraphrase of anything asked, with no MiniLM vectors yet (the worst case for the lazy MiniLM
vectors; `--vectors N`: those the first N questions meet over the static gate come with theirs,
as once earlier lookups have met them; each run prints how many questions it asked, and says
so when a faster machine took it past the first N, into the worst case). Spliced from the
asked questions themselves, each question would meet a dozen fillers sharing half its words at
100k, all over the gate. Reported: p50 at 1 connection (exact-only, semantic, the difference),
requests/s at 32 connections and the ratio, the gateway's CPU per request, and the semantic
hits the runs got.

Recall, hits lost and MiniLM texts per question are counted in process, by
bench/semantic_cache_stage.py (which also makes the question stream and the fillers).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cache_fill import fill_namespaces  # noqa: E402
from bench.harness import (  # noqa: E402
    ADMIN_KEY,
    MODEL,
    Processes,
    WrkResult,
    base_env,
    bench_model,
    cpu_ms,
    free_port,
    main_thread_cpu_ms,
    run_wrk,
    wait_http,
)
from bench.semantic_cache_stage import fillers, minilm_texts, miss_cpu, questions, recall, served_recall  # noqa: E402
from gateway.config.settings import SemanticCacheConfig  # noqa: E402
from policies.exact_cache import request_keys  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
REDIS_URL = "redis://127.0.0.1:6379/0"
CONNECTIONS = (1, 32)
STREAM_SPLICES = 40_000  # after the asked questions: exact-only runs pass 10k requests in 3 s


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


@dataclass(frozen=True)
class Measured:
    wrk: WrkResult
    cpu_us: float  # the gateway's CPU per request
    main_us: float  # of which its main thread's (the event loop; the rest is mostly MiniLM's thread)
    hits: dict[str, float]


def measure(gw: Gateway, team: Team, bodies: Path, args: argparse.Namespace, warm_up: bool = False) -> Measured:
    before_hits, before_cpu, before_main = gw.hits(), cpu_ms(gw.proc.pid), main_thread_cpu_ms(gw.proc.pid)
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
    cpu, main = cpu_ms(gw.proc.pid) - before_cpu, main_thread_cpu_ms(gw.proc.pid) - before_main
    after, per_request = gw.hits(), 1000 / max(result.requests, 1)
    return Measured(result, cpu * per_request, main * per_request, {k: after[k] - before_hits[k] for k in after})


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
            redis_at = (REDIS_URL, gw.prefix) if backend == "redis" else None
            fill_namespaces(plan, texts, args.vectors, gw.data_dir, redis_at)
            gw.start()
            print(
                f"\n{backend}: filled {sum(len(p[1]) for p in plan):,} entries and restarted in "
                f"{time.monotonic() - started:.0f} s; load average {os.getloadavg()[0]:.2f}",
                flush=True,
            )
            bodies = Path(tmp) / "bodies.jsonl"
            stream = texts + fillers(texts, STREAM_SPLICES, seed=len(all_teams))  # never round in 3 s
            bodies.write_text("".join(json.dumps(body(q)) + "\n" for q in dict.fromkeys(stream)))
            measure(gw, all_teams[-1], bodies, args, warm_up=True)  # a team of its own: pools, caches
            results = {}
            for team in all_teams[:-1]:
                results[team.name] = measure(gw, team, bodies, args)
                m = results[team.name]
                past = team.semantic and team.fill and 0 < args.vectors < m.wrk.requests
                print(
                    f"  {team.name}: p50 {m.wrk.p50_ms:.3f} ms p99 {m.wrk.p99_ms:.3f} ms, {m.wrk.rps:.0f} req/s, "
                    f"CPU {m.cpu_us:.0f} us/request (main thread {m.main_us:.0f}), hits {m.hits}, "
                    f"{m.wrk.requests:,} questions"
                    + (f" (past the first {args.vectors:,}: the rest met fillers in the worst case)" if past else ""),
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
        f"| CPU/request @32 exact-only | semantic (its main thread) | semantic hits @1, @32"
    )
    for n in fill:
        e1, s1 = results[f"exact-{n}-1"], results[f"semantic-{n}-1"]
        e32, s32 = results[f"exact-{n}-32"], results[f"semantic-{n}-32"]
        added, ratio = s1.wrk.p50_ms - e1.wrk.p50_ms, s32.wrk.rps / e32.wrk.rps
        print(
            f"{n:,} entries | {e1.wrk.p50_ms:.2f} ms | {s1.wrk.p50_ms:.2f} ms | {added:+.2f} ms "
            f"({'met' if added <= 3 else 'NOT met'}) | {e32.wrk.rps:.0f} | {s32.wrk.rps:.0f} | {ratio:.0%} "
            f"({'met' if ratio >= 0.3 else 'NOT met'}) | {e32.cpu_us:.0f} us | {s32.cpu_us:.0f} us ({s32.main_us:.0f}) "
            f"| {s1.hits['semantic']:.0f}, {s32.hits['semantic']:.0f}"
        )


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
    parser.add_argument(
        "--cpu-only", action="store_true", help="only where a miss's CPU goes, in process, at the largest --fill"
    )
    args = parser.parse_args()
    fill = [int(n) for n in args.fill.split(",") if n]
    if args.cpu_only:
        miss_cpu(args.data, max(fill), args.texts or 1000, SemanticCacheConfig().max_false_hit_rate)
        return
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
