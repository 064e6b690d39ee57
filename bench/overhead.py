"""Issue 2's speed benchmark: what costgate adds on top of an upstream, against LiteLLM's proxy.

Set-up (all in one run, so the figures are comparable):
- a fast fake OpenAI upstream (bench/fast_upstream.py) and the load generator (wrk) share
  one core (`--load-cpu`, default 1);
- the proxy under test is pinned alone to the other (`--gateway-cpu`, default 0);
- costgate: a real key created through the admin API, SQLite ledger, metrics, every stage of
  the pipeline as configured (the caches are off so that each request is a real upstream call);
- LiteLLM's proxy 1.110.2 from its own venv (`--litellm-venv`), a master key, no database,
  the same fake upstream.

Measured per product: added latency p50/p99 at 1 connection (proxy path minus the direct
path to the fake, measured right before it) and requests/s at 32 connections. Each round is
repeated `--runs` times and the median reported. Needs wrk: `apt-get install -y wrk`.

The streaming row (issue 14 item 6): the fake streams a token every 20 ms; a raw HTTP/1.1
client on the load core (this process, keep-alive, one request at a time) times each
request's first token — from the request's first byte sent to the first byte of the first
token's chunk — direct, through costgate and through LiteLLM, `--stream-requests` each, the
direct ones right before each product's. Added first-token latency = proxied minus direct.
Its control (`--idle-gap-ms`, 0 skips it): whole answers one at a time, as far apart as the
streams, direct and proxied; on a shared machine the first ~1 ms of work after an idle gap
runs several times slower than back to back, so wrk's whole-answer row is not its comparison.

    .venv/bin/python bench/overhead.py [--runs 3] [--duration 8] [--no-litellm] [--profile DIR]
    .venv/bin/python bench/overhead.py --stream-only --runs 3 --stream-requests 60
    .venv/bin/python bench/overhead.py --stream-only --no-litellm --trace-phases  # needs perf
    .venv/bin/python bench/overhead.py --stream-only --no-litellm --floor  # and the stack's floor

`--profile DIR` adds one py-spy-sampled 32-connection run per product (py-spy from PyPI, in
any venv on PATH or `--py-spy`), written as speedscope files: where the proxy's CPU goes.

LiteLLM's venv, once (its `[proxy]` extra names `litellm-proxy`, which the registry lacks):
    python3.11 -m venv /tmp/litellm-venv && bash bench/install_litellm.sh /tmp/litellm-venv
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.first_token import StreamRound, measure_stream, report_stream  # noqa: E402
from bench.harness import (  # noqa: E402
    BENCH,
    BODY,
    Processes,
    WrkResult,
    base_env,
    cpu_ms,
    free_port,
    run_wrk,
    wait_http,
)
from bench.proxies import LITELLM_MASTER_KEY, start_costgate, start_floor, start_litellm  # noqa: E402


@dataclass(frozen=True)
class Round:
    direct: WrkResult
    latency: WrkResult
    throughput: WrkResult
    cpu_ms: float  # the proxy's own CPU time during the throughput run
    serial_cpu_ms: float  # ... and during the 1-connection run

    @property
    def cpu_us_per_request(self) -> float:
        """Independent of what else the machine runs: 1e6 / this is the proxy's req/s on an idle core."""
        return self.cpu_ms * 1000 / max(self.throughput.requests, 1)

    @property
    def serial_cpu_us_per_request(self) -> float:
        """CPU per request one at a time: about the latency the proxy adds on an idle core."""
        return self.serial_cpu_ms * 1000 / max(self.latency.requests, 1)

    @property
    def added_p50_ms(self) -> float:
        return self.latency.p50_ms - self.direct.p50_ms

    @property
    def added_p99_ms(self) -> float:
        return self.latency.p99_ms - self.direct.p99_ms


def check_answers(url: str, key: str) -> None:
    """One request by hand, so that a misconfigured proxy fails loudly instead of benchmarking errors."""
    response = httpx.post(
        url, content=BODY, headers={"authorization": f"Bearer {key}", "content-type": "application/json"}, timeout=30
    )
    if response.status_code != 200 or "choices" not in response.json():
        raise RuntimeError(f"{url} answered {response.status_code}: {response.text[:300]}")


def start_profiler(name: str, pid: int, args: argparse.Namespace) -> subprocess.Popen | None:
    """py-spy on the proxy for one throughput run (`--profile DIR`): a speedscope file per product."""
    if args.profile is None:
        return None
    args.profile.mkdir(parents=True, exist_ok=True)
    out = args.profile / f"{name}.speedscope.json"
    return subprocess.Popen(
        [
            args.py_spy,
            "record",
            "--pid",
            str(pid),
            "--duration",
            str(args.duration),
            "--rate",
            "250",
            "--format",
            "speedscope",
            "--output",
            str(out),
            "--nonblocking",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def measure(name: str, url: str, key: str, pid: int, direct_url: str, args: argparse.Namespace) -> list[Round]:
    check_answers(url, key)
    run_wrk(url, key, BODY, 8, args.warmup, args.load_cpu)  # warm the pools and caches
    profiler = start_profiler(name, pid, args)
    if profiler is not None:  # a profiled run of its own: py-spy's sampling costs the proxy CPU
        run_wrk(url, key, BODY, 32, args.duration, args.load_cpu)
        profiler.wait()
        print(f"  {name}: profile in {args.profile}/{name}.speedscope.json (open in https://speedscope.app)")
    rounds = []
    for i in range(args.runs):
        direct = run_wrk(direct_url, "", BODY, 1, args.duration, args.load_cpu)
        cpu_before = cpu_ms(pid)
        latency = run_wrk(url, key, BODY, 1, args.duration, args.load_cpu)
        serial_cpu = cpu_ms(pid) - cpu_before
        cpu_before = cpu_ms(pid)
        throughput = run_wrk(url, key, BODY, 32, args.duration, args.load_cpu)
        cpu = cpu_ms(pid) - cpu_before
        for r in (latency, throughput):
            if r.errors or r.non2xx:
                raise RuntimeError(f"{name}: {r.errors} socket errors, {r.non2xx} non-2xx answers in the run")
        rounds.append(Round(direct, latency, throughput, cpu, serial_cpu))
        print(
            f"  {name} run {i + 1}: direct p50 {direct.p50_ms:.3f} ms p99 {direct.p99_ms:.3f} ms | "
            f"proxied p50 {latency.p50_ms:.3f} ms p99 {latency.p99_ms:.3f} ms | "
            f"added p50 {rounds[-1].added_p50_ms:.3f} ms p99 {rounds[-1].added_p99_ms:.3f} ms | "
            f"{throughput.rps:.0f} req/s @32 | CPU/request {rounds[-1].serial_cpu_us_per_request:.0f} us @1, "
            f"{rounds[-1].cpu_us_per_request:.0f} us @32",
            flush=True,
        )
    return rounds


@dataclass(frozen=True)
class Summary:
    added_p50_ms: float
    added_p99_ms: float
    rps: float
    cpu_us_per_request: float
    serial_cpu_us_per_request: float

    @classmethod
    def of(cls, rounds: list[Round]) -> Summary:
        return cls(
            statistics.median(r.added_p50_ms for r in rounds),
            statistics.median(r.added_p99_ms for r in rounds),
            statistics.median(r.throughput.rps for r in rounds),
            statistics.median(r.cpu_us_per_request for r in rounds),
            statistics.median(r.serial_cpu_us_per_request for r in rounds),
        )


def report(costgate: Summary, litellm: Summary | None, load: str) -> None:
    print(f"\nmedian of the runs ({load})")
    print(f"{'':10} {'added p50':>12} {'added p99':>12} {'req/s @32':>12} {'CPU/req @1':>12} {'CPU/req @32':>12}")
    for name, s in (("costgate", costgate), ("litellm", litellm)):
        if s is not None:
            print(
                f"{name:10} {s.added_p50_ms:>9.3f} ms {s.added_p99_ms:>9.3f} ms {s.rps:>12.0f} "
                f"{s.serial_cpu_us_per_request:>9.0f} us {s.cpu_us_per_request:>9.0f} us"
            )
    print(
        f"\ntarget: added p50 <= 1 ms -> {'met' if costgate.added_p50_ms <= 1 else 'NOT met'} "
        f"({costgate.added_p50_ms:.3f} ms; CPU per request one at a time, what it adds on an idle "
        f"core: {costgate.serial_cpu_us_per_request / 1000:.3f} ms)"
    )
    if litellm is not None:
        ratio = costgate.rps / litellm.rps
        print(
            f"ratios vs LiteLLM: requests/s x{ratio:.1f} (target >= 10x: {'met' if ratio >= 10 else 'NOT met'}); "
            f"added p50 {litellm.added_p50_ms / max(costgate.added_p50_ms, 1e-3):.1f}x lower; "
            f"added p99 {litellm.added_p99_ms / max(costgate.added_p99_ms, 1e-3):.1f}x lower; "
            f"CPU per request {litellm.cpu_us_per_request / costgate.cpu_us_per_request:.1f}x lower @32, "
            f"{litellm.serial_cpu_us_per_request / costgate.serial_cpu_us_per_request:.1f}x lower @1"
        )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="costgate vs LiteLLM proxy overhead (issue 2)")
    parser.add_argument("--runs", type=int, default=3, help="rounds per product; the median is reported")
    parser.add_argument("--duration", type=int, default=8, help="seconds per wrk run")
    parser.add_argument("--warmup", type=int, default=3, help="seconds of warm-up per product")
    parser.add_argument("--gateway-cpu", type=int, default=0)
    parser.add_argument("--load-cpu", type=int, default=1)
    parser.add_argument("--litellm-venv", type=Path, default=Path(os.environ.get("LITELLM_VENV", "/tmp/litellm-venv")))
    parser.add_argument("--no-litellm", action="store_true", help="measure costgate only")
    parser.add_argument("--stream-only", action="store_true", help="only the streaming first-token row")
    parser.add_argument("--no-stream", action="store_true", help="skip the streaming first-token row")
    parser.add_argument("--stream-requests", type=int, default=60, help="streamed requests per product per run")
    parser.add_argument("--token-interval-ms", type=float, default=20.0, help="the fake's time between tokens")
    parser.add_argument(
        "--stream-gap-ms",
        type=float,
        default=0.0,
        help="idle before each streamed request (default 0: each follows the previous one's last byte)",
    )
    parser.add_argument(
        "--idle-gap-ms",
        type=float,
        default=180.0,
        help="the streaming row's control: whole answers this far apart (a stream's length); 0 skips it",
    )
    parser.add_argument(
        "--ledger-flush-s", type=float, help="costgate's ledger_flush_interval_s (default: the product's)"
    )
    parser.add_argument(
        "--trace-phases",
        action="store_true",
        help="one extra round of streams a product under `perf trace`: the first token's two halves "
        "in the proxy (bench/first_token_phases.py)",
    )
    parser.add_argument(
        "--floor",
        action="store_true",
        help="the streaming row also for bench/floor_proxy.py: costgate's HTTP stack relaying with no gateway in it",
    )
    parser.add_argument("--json", type=Path, help="also write the medians here")
    parser.add_argument(
        "--profile",
        type=Path,
        help="py-spy each proxy for one extra 32-connection run, "
        "speedscope files into this folder (pip install py-spy, anywhere)",
    )
    parser.add_argument("--py-spy", default=shutil.which("py-spy") or "py-spy", help="the py-spy command")
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    if shutil.which("wrk") is None and not args.stream_only:
        sys.exit("wrk is missing: apt-get install -y wrk")
    if not args.no_litellm and not (args.litellm_venv / "bin" / "litellm").exists():
        sys.exit(
            f"no LiteLLM venv at {args.litellm_venv}: python3.11 -m venv {args.litellm_venv} && "
            f"bash bench/install_litellm.sh {args.litellm_venv}   (or pass --no-litellm)"
        )
    os.sched_setaffinity(0, {args.load_cpu})  # the streaming row's client shares the load core
    load_before = os.getloadavg()
    costgate = litellm = None
    streams: dict[str, list[StreamRound]] = {}
    with tempfile.TemporaryDirectory(prefix="costgate-bench-") as tmp:
        procs = Processes(Path(tmp))
        try:
            port = free_port()
            fake = procs.start(
                "upstream",
                args.load_cpu,
                [
                    sys.executable,
                    str(BENCH / "fast_upstream.py"),
                    "--port",
                    str(port),
                    "--token-interval-ms",
                    str(args.token_interval_ms),
                ],
                base_env(),
                ROOT,
            )
            upstream = f"http://127.0.0.1:{port}/v1"
            wait_http(upstream + "/models", fake, 30)
            direct_url = upstream + "/chat/completions"
            cg_url, cg_key, cg_pid = start_costgate(procs, args.gateway_cpu, upstream, args.ledger_flush_s)
            print(
                f"costgate (cpu {args.gateway_cpu}), load + fake upstream (cpu {args.load_cpu}), "
                f"{args.runs} x {args.duration:g} s",
                flush=True,
            )
            if not args.stream_only:
                costgate = Summary.of(measure("costgate", cg_url, cg_key, cg_pid, direct_url, args))
            if not args.no_stream:
                streams["costgate"] = measure_stream("costgate", cg_url, cg_key, cg_pid, direct_url, args)
            if args.floor and not args.no_stream:
                floor_url, floor_pid = start_floor(procs, args.gateway_cpu, upstream)
                streams["floor"] = measure_stream("floor", floor_url, "", floor_pid, direct_url, args)
            if not args.no_litellm:
                ll_url, ll_pid = start_litellm(procs, args.gateway_cpu, upstream, args.litellm_venv)
                if not args.stream_only:
                    litellm = Summary.of(measure("litellm", ll_url, LITELLM_MASTER_KEY, ll_pid, direct_url, args))
                if not args.no_stream:
                    streams["litellm"] = measure_stream("litellm", ll_url, LITELLM_MASTER_KEY, ll_pid, direct_url, args)
        finally:
            procs.stop_all()
    load_after = os.getloadavg()
    load = f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after, {os.cpu_count()} cores"
    if costgate is not None:
        report(costgate, litellm, load)
    if streams:
        report_stream(streams, args.token_interval_ms)
        print(load)
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "costgate": None if costgate is None else costgate.__dict__,
                    "litellm": None if litellm is None else litellm.__dict__,
                    "stream_added_p50_ms": {
                        n: statistics.median(r.added_p50_ms for r in rs) for n, rs in streams.items()
                    },
                    "stream_idle_whole_added_p50_ms": {
                        n: statistics.median(r.idle_added_p50_ms for r in rs) for n, rs in streams.items()
                    },
                    "load": load,
                    "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
