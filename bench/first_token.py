"""The streaming row of bench/overhead.py (issue 14 item 6): first-token latency, timed by a raw
HTTP/1.1 client on one keep-alive connection, one request at a time — from the request's first
byte sent to the arrival of the bytes holding the first token — direct to the fake upstream and
through a proxy; and its control, whole answers one at a time as far apart as the streams.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from dataclasses import dataclass

import httpx

from bench.harness import BODY, STREAM_BODY, cpu_ms

FIRST_TOKEN = b"tok0"  # the first streamed token's text (bench/fast_upstream.py)


@dataclass(frozen=True)
class StreamRound:
    direct_ms: list[float]  # first-token latency of each direct request
    proxied_ms: list[float]
    cpu_us_per_request: float  # the proxy's CPU per streamed request (all of it, not only the first token's)
    # The control: whole answers one at a time, as far apart as the streams (--idle-gap-ms).
    idle_direct_ms: list[float]
    idle_proxied_ms: list[float]

    @property
    def added_p50_ms(self) -> float:
        return statistics.median(self.proxied_ms) - statistics.median(self.direct_ms)

    @property
    def idle_added_p50_ms(self) -> float:
        if not self.idle_proxied_ms:
            return float("nan")
        return statistics.median(self.idle_proxied_ms) - statistics.median(self.idle_direct_ms)

    @property
    def added_p90_ms(self) -> float:
        return _p90(self.proxied_ms) - _p90(self.direct_ms)


def _p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10)[-1]


async def _first_tokens(url: str, key: str, requests: int, gap_s: float = 0.0) -> list[float]:
    """Each request's first-token latency, in ms, one request at a time on one keep-alive
    connection (`gap_s` idle before each): from its first byte sent to the arrival of the bytes
    holding the first token."""
    parsed = httpx.URL(url)
    reader, writer = await asyncio.open_connection(parsed.host, parsed.port)
    auth = f"authorization: Bearer {key}\r\n".encode() if key else b""
    request = (
        f"POST {parsed.raw_path.decode()} HTTP/1.1\r\nhost: {parsed.host}:{parsed.port}\r\n".encode()
        + auth
        + f"content-type: application/json\r\ncontent-length: {len(STREAM_BODY)}\r\n\r\n".encode()
        + STREAM_BODY
    )
    times = []
    try:
        for _ in range(requests):
            if gap_s:
                await asyncio.sleep(gap_s)
            seen, first = bytearray(), None
            start = time.perf_counter()
            writer.write(request)
            while not (b"[DONE]" in seen and seen.endswith(b"0\r\n\r\n")):
                data = await reader.read(65536)
                if not data:
                    raise RuntimeError(f"{url} closed the connection mid-answer: {bytes(seen[-300:])!r}")
                seen += data
                if first is None and FIRST_TOKEN in seen:
                    first = (time.perf_counter() - start) * 1000
            if first is None or not seen.startswith(b"HTTP/1.1 200"):
                raise RuntimeError(f"{url} streamed no token: {bytes(seen[:300])!r}")
            times.append(first)
    finally:
        writer.close()
    return times


def first_tokens(url: str, key: str, requests: int, gap_s: float = 0.0) -> list[float]:
    return asyncio.run(_first_tokens(url, key, requests, gap_s))


async def _whole_answers(url: str, key: str, requests: int, gap_s: float) -> list[float]:
    """Each whole (unstreamed) answer's latency, in ms, one request at a time on one keep-alive
    connection with `gap_s` idle between them: the streaming row's control. A stream leaves
    the proxy idle between its tokens, and on the bench machine the first ~1 ms of work after
    any idle runs several times slower than back to back (wrk's whole-answer row)."""
    parsed = httpx.URL(url)
    reader, writer = await asyncio.open_connection(parsed.host, parsed.port)
    auth = f"authorization: Bearer {key}\r\n".encode() if key else b""
    body = BODY.encode()
    request = (
        f"POST {parsed.raw_path.decode()} HTTP/1.1\r\nhost: {parsed.host}:{parsed.port}\r\n".encode()
        + auth
        + f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n".encode()
        + body
    )
    times = []
    try:
        for _ in range(requests):
            await asyncio.sleep(gap_s)
            start = time.perf_counter()
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            await reader.readexactly(length)
            times.append((time.perf_counter() - start) * 1000)
            if not head.startswith(b"HTTP/1.1 200"):
                raise RuntimeError(f"{url} answered {head[:200]!r}")
    finally:
        writer.close()
    return times


def whole_answers(url: str, key: str, requests: int, gap_s: float) -> list[float]:
    return asyncio.run(_whole_answers(url, key, requests, gap_s))


def measure_stream(
    name: str, url: str, key: str, pid: int, direct_url: str, args: argparse.Namespace
) -> list[StreamRound]:
    first_tokens(url, key, 5)  # warm the connections
    if getattr(args, "trace_phases", False):
        trace_phases(name, url, key, pid, args)
    rounds = []
    gap_s = getattr(args, "stream_gap_ms", 0.0) / 1000
    for i in range(args.runs):
        direct = first_tokens(direct_url, "", args.stream_requests, gap_s)
        cpu_before = cpu_ms(pid)
        proxied = first_tokens(url, key, args.stream_requests, gap_s)
        cpu = (cpu_ms(pid) - cpu_before) * 1000 / args.stream_requests
        idle_direct: list[float] = []
        idle_proxied: list[float] = []
        if args.idle_gap_ms > 0:
            idle_direct = whole_answers(direct_url, "", args.stream_requests, args.idle_gap_ms / 1000)
            idle_proxied = whole_answers(url, key, args.stream_requests, args.idle_gap_ms / 1000)
        rounds.append(StreamRound(direct, proxied, cpu, idle_direct, idle_proxied))
        print(
            f"  {name} stream run {i + 1}: first token direct p50 {statistics.median(direct):.3f} ms | "
            f"proxied p50 {statistics.median(proxied):.3f} ms p90 {_p90(proxied):.3f} ms | "
            f"added p50 {rounds[-1].added_p50_ms:.3f} ms p90 {rounds[-1].added_p90_ms:.3f} ms | "
            f"CPU/request {cpu:.0f} us | whole answer every {args.idle_gap_ms:g} ms: "
            f"added p50 {rounds[-1].idle_added_p50_ms:.3f} ms",
            flush=True,
        )
    return rounds


def report_stream(rows: dict[str, list[StreamRound]], interval_ms: float) -> None:
    print(f"\nstreaming, first token (upstream: a token every {interval_ms:g} ms), median of the runs")
    print(
        f"{'':10} {'direct p50':>12} {'proxied p50':>12} {'added p50':>12} {'added p90':>12} {'CPU/stream':>12}"
        f" {'whole, idle':>12}"
    )
    for name, rounds in rows.items():
        direct = statistics.median(statistics.median(r.direct_ms) for r in rounds)
        proxied = statistics.median(statistics.median(r.proxied_ms) for r in rounds)
        added = statistics.median(r.added_p50_ms for r in rounds)
        added90 = statistics.median(r.added_p90_ms for r in rounds)
        cpu = statistics.median(r.cpu_us_per_request for r in rounds)
        idle = statistics.median(r.idle_added_p50_ms for r in rounds)
        print(
            f"{name:10} {direct:>9.3f} ms {proxied:>9.3f} ms {added:>9.3f} ms {added90:>9.3f} ms {cpu:>9.0f} us"
            f" {idle:>9.3f} ms"
        )
    print("whole, idle: a whole answer's added p50 when requests come as far apart as the streams (--idle-gap-ms)")


def trace_phases(name: str, url: str, key: str, pid: int, args: argparse.Namespace) -> None:
    """One extra round of streams under `perf trace` (bench/first_token_phases.py): the proxy's
    part of the first token, cut at its syscalls into its two halves."""
    from bench.first_token_phases import Tracer, summary

    with Tracer(pid) as tracer:
        first_tokens(url, key, args.stream_requests)
    phases = tracer.phases(args.token_interval_ms)
    print(f"  {name} phases (perf trace): request in -> upstream out {summary(phases.pre_call_ms)}")
    print(f"  {name} phases (perf trace): first chunk in -> out       {summary(phases.first_chunk_ms)}")
