"""Soak: the gateway under a steady streaming load for a long time (issue 8).

Starts the fake upstream (tests.fakes.fake_openai) and `costgate serve` as real
processes, makes a key, then sends chat requests at a fixed rate (most of them streamed,
every fifth one whole) for `--duration` seconds (default 20 minutes). Every `--sample`
seconds it reads the gateway's RSS (/proc/PID/status) and open file descriptors
(/proc/PID/fd). It prints, and writes as JSON with `--json`:

- RSS at the end of warm-up and at the end, and the growth between them (the target: <= 5%);
- open fds at the end of warm-up and at the end (the target: no growth beyond noise);
- requests sent, errors (any non-200, any stream without [DONE] or with an error event);
- latency p50/p99 for the streamed requests.

    .venv/bin/python bench/soak.py                     # 20 min at 10 req/s
    .venv/bin/python bench/soak.py --duration 120 --rate 20 --warmup 30

This is a benchmark, not a test: nothing here asserts; the numbers go in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx
import yaml

ROOT = Path(__file__).resolve().parent.parent
ADMIN_KEY = "sk-cg-admin-soak-" + os.urandom(8).hex()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_up(url: str, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process exited ({proc.returncode}) before serving {url}")
        try:
            if httpx.get(url, timeout=1).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise TimeoutError(url)


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


@dataclass
class Sample:
    t_s: float
    rss_kib: int
    fds: int
    sent: int
    errors: int


@dataclass
class Tally:
    sent: int = 0
    shed: int = 0  # not sent: the load generator already had --max-inflight requests open
    ok: int = 0
    errors: int = 0
    error_kinds: dict[str, int] = field(default_factory=dict)
    stream_latency_s: list[float] = field(default_factory=list)

    def fail(self, kind: str) -> None:
        self.errors += 1
        self.error_kinds[kind] = self.error_kinds.get(kind, 0) + 1


def error_code(raw: bytes) -> str:
    try:
        return str(json.loads(raw)["error"]["code"])
    except (ValueError, KeyError, TypeError):
        return "?"


async def one_request(client: httpx.AsyncClient, key: str, n: int, tally: Tally) -> None:
    stream = n % 5 != 0
    body = {
        "model": "small",
        "stream": stream,
        "messages": [{"role": "user", "content": f"soak request {n}: tell me something about {n % 97}"}],
    }
    if stream and n % 2:
        body["stream_options"] = {"include_usage": True}
    headers = {"authorization": f"Bearer {key}"}
    started = time.perf_counter()
    tally.sent += 1
    try:
        if not stream:
            r = await client.post("/v1/chat/completions", json=body, headers=headers)
            if r.status_code != 200:
                tally.fail(f"status {r.status_code} {error_code(r.content)}")
                return
            if not r.json()["choices"][0]["message"]["content"].startswith("echo:"):
                tally.fail("wrong answer")
                return
            tally.ok += 1
            return
        async with client.stream("POST", "/v1/chat/completions", json=body, headers=headers) as r:
            if r.status_code != 200:
                tally.fail(f"status {r.status_code} {error_code(await r.aread())}")
                return
            done, text = False, []
            async for line in r.aiter_lines():
                if line == "data: [DONE]":
                    done = True
                elif line.startswith("data: "):
                    event = json.loads(line[6:])
                    if "error" in event:
                        tally.fail(f"error event {event['error'].get('code')}")
                        return
                    for choice in event.get("choices") or ():
                        text.append(choice.get("delta", {}).get("content") or "")
            if not done or not "".join(text).startswith("echo:"):
                tally.fail("incomplete stream")
                return
        tally.ok += 1
        tally.stream_latency_s.append(time.perf_counter() - started)
    except (httpx.HTTPError, ValueError, KeyError) as err:
        tally.fail(type(err).__name__)


def cpu_s(pid: int) -> float:
    """User + system CPU seconds the process has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def drive(
    url: str, key: str, pid: int, duration: float, rate: float, sample_every: float, progress: bool, max_inflight: int
) -> tuple[Tally, list[Sample]]:
    tally, samples = Tally(), []
    interval = 1.0 / rate
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=50)
    async with httpx.AsyncClient(base_url=url, timeout=30, limits=limits) as client:
        start = time.monotonic()
        next_sample = start
        tasks: set[asyncio.Task] = set()
        n = 0
        while (now := time.monotonic()) - start < duration:
            if now >= next_sample:
                samples.append(Sample(round(now - start, 1), rss_kib(pid), open_fds(pid), tally.sent, tally.errors))
                if progress:
                    s = samples[-1]
                    print(
                        f"t={s.t_s:7.1f}s rss={s.rss_kib / 1024:7.1f} MiB fds={s.fds} sent={s.sent} "
                        f"errors={s.errors} inflight={len(tasks)} shed={tally.shed} "
                        f"load={os.getloadavg()[0]:.1f}",
                        flush=True,
                    )
                next_sample += sample_every
            if len(tasks) >= max_inflight:  # the machine cannot keep up: shed, do not pile up
                tally.shed += 1
            else:
                task = asyncio.create_task(one_request(client, key, n, tally))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
            n += 1
            # Fixed schedule (not "after the last one finished"): the rate stays steady.
            await asyncio.sleep(max(0.0, start + n * interval - time.monotonic()))
        if tasks:
            await asyncio.wait(tasks, timeout=60)
        await asyncio.sleep(1.0)  # let the gateway close finished connections before the last count
        samples.append(
            Sample(round(time.monotonic() - start, 1), rss_kib(pid), open_fds(pid), tally.sent, tally.errors)
        )
    return tally, samples


def summarize(tally: Tally, samples: list[Sample], warmup: float, duration: float, rate: float) -> dict:
    after = [s for s in samples if s.t_s >= warmup] or samples
    base, end = after[0], samples[-1]
    lat = sorted(tally.stream_latency_s)

    def pct(p: float) -> float | None:
        return round(lat[min(len(lat) - 1, int(p * len(lat)))] * 1000, 1) if lat else None

    return {
        "duration_s": duration,
        "rate_per_s": rate,
        "warmup_s": warmup,
        "sent": tally.sent,
        "shed_by_load_generator": tally.shed,
        "ok": tally.ok,
        "errors": tally.errors,
        "error_kinds": tally.error_kinds,
        "rss_warm_mib": round(base.rss_kib / 1024, 1),
        "rss_end_mib": round(end.rss_kib / 1024, 1),
        "rss_max_after_warmup_mib": round(max(s.rss_kib for s in after) / 1024, 1),
        "rss_growth_pct": round(100 * (end.rss_kib - base.rss_kib) / base.rss_kib, 2),
        "fds_warm": base.fds,
        "fds_end": end.fds,
        "fds_max_after_warmup": max(s.fds for s in after),
        "stream_p50_ms": pct(0.5),
        "stream_p99_ms": pct(0.99),
        "rss_median_first_quarter_mib": round(
            statistics.median(s.rss_kib for s in after[: max(1, len(after) // 4)]) / 1024, 1
        ),
        "rss_median_last_quarter_mib": round(
            statistics.median(s.rss_kib for s in after[-max(1, len(after) // 4) :]) / 1024, 1
        ),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=1200.0, help="seconds of load (default 20 min)")
    parser.add_argument("--rate", type=float, default=10.0, help="requests per second")
    parser.add_argument(
        "--warmup",
        type=float,
        default=None,
        help="seconds before the RSS baseline (default: 10%% of the duration, at most 120)",
    )
    parser.add_argument("--sample", type=float, default=10.0, help="seconds between RSS/fd samples")
    parser.add_argument(
        "--max-inflight",
        type=int,
        default=100,
        help="open requests at most; beyond it a tick is shed (counted) instead of piling up",
    )
    parser.add_argument("--json", type=Path, help="also write the summary and samples here")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args()
    warmup = args.warmup if args.warmup is not None else min(120.0, args.duration * 0.1)

    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update({"PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    with tempfile.TemporaryDirectory(prefix="costgate-soak-") as tmp:
        work = Path(tmp)
        up_port, gw_port = free_port(), free_port()
        upstream = subprocess.Popen(
            [sys.executable, "-m", "tests.fakes.fake_openai", "--port", str(up_port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=ROOT,
        )
        config = {
            "admin_key": ADMIN_KEY,
            "database_url": f"sqlite:///{work}/costgate.db",
            "data_dir": str(work / "data"),
            "models": [
                {
                    "name": "small",
                    "provider": "openai",
                    "model": "echo-small",
                    "api_base": f"http://127.0.0.1:{up_port}/v1",
                    "api_key": "fake-key",
                    "price": {"input_per_mtok": "0.15", "output_per_mtok": "0.6"},
                }
            ],
        }
        (work / "config.yaml").write_text(yaml.safe_dump(config))
        log = open(work / "gateway.log", "wb")
        gateway = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gateway.cli",
                "serve",
                "--config",
                str(work / "config.yaml"),
                "--port",
                str(gw_port),
                "--log-level",
                "warning",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=work,
        )
        url = f"http://127.0.0.1:{gw_port}"
        try:
            wait_up(f"http://127.0.0.1:{up_port}/_stats", upstream)
            wait_up(url + "/healthz", gateway)
            admin = {"authorization": f"Bearer {ADMIN_KEY}"}
            httpx.post(url + "/admin/teams", json={"name": "soak"}, headers=admin).raise_for_status()
            key = httpx.post(url + "/admin/keys", json={"team": "soak"}, headers=admin).json()["key"]
            tally, samples = asyncio.run(
                drive(url, key, gateway.pid, args.duration, args.rate, args.sample, not args.quiet, args.max_inflight)
            )
            alive = gateway.poll() is None
            gateway_cpu_s = cpu_s(gateway.pid) if alive else None
        finally:
            for proc in (gateway, upstream):
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
                    proc.wait(30)
            log.close()
        log_errors = [
            line
            for line in (work / "gateway.log").read_text(errors="replace").splitlines()
            if "ERROR" in line or "Traceback" in line
        ]
        if log_errors:
            print("\n".join(log_errors[:20]), file=sys.stderr)
    summary = summarize(tally, samples, warmup, args.duration, args.rate)
    summary["gateway_alive_at_end"] = alive
    summary["gateway_cpu_s"] = gateway_cpu_s
    summary["gateway_log_error_lines"] = len(log_errors)
    summary["cpus"] = os.cpu_count()
    summary["loadavg_end"] = os.getloadavg()
    print(json.dumps(summary, indent=2))
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "samples": [asdict(s) for s in samples]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
