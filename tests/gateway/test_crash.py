"""Crash consistency: SIGKILL the gateway under load; after a restart every request whose
answer reached its client has its ledger row, exactly once."""

from __future__ import annotations

import sqlite3
import threading

import httpx
import pytest

from tests.conftest import standard_models
from tests.support import GatewayProcess, wait_until

pytestmark = pytest.mark.slow  # boots processes: not in the fast lane


def complete_answers(gw: GatewayProcess, key: str, stop: threading.Event, done: list[str]) -> None:
    """Send requests until stopped; keep the ids of answers that arrived whole."""
    headers = {"authorization": f"Bearer {key}"}
    i = 0
    while not stop.is_set():
        i += 1
        stream = i % 2 == 0
        body = {"model": "small", "stream": stream, "messages": [{"role": "user", "content": f"n {i}"}]}
        try:
            if stream:
                with httpx.stream(
                    "POST", gw.url + "/v1/chat/completions", json=body, headers=headers, timeout=10
                ) as response:
                    lines = [line for line in response.iter_lines() if line]
                    if response.status_code == 200 and lines and lines[-1] == "data: [DONE]":
                        done.append(response.headers["x-costgate-request-id"])
            else:
                response = httpx.post(gw.url + "/v1/chat/completions", json=body, headers=headers, timeout=10)
                if response.status_code == 200 and response.json()["choices"]:
                    done.append(response.headers["x-costgate-request-id"])
        except (httpx.HTTPError, ValueError):
            pass  # the gateway died under this request: its answer never arrived whole


def test_sigkill_under_load_loses_no_answered_request(tmp_path, fake_upstream) -> None:
    # A flush interval far beyond the test's length: rows can reach the database only
    # through the journal's replay after the kill.
    gw = GatewayProcess(
        {"models": standard_models(fake_upstream.url), "ledger_flush_interval_s": 3600, "ledger_batch_size": 100_000},
        tmp_path / "gw",
    )
    key = gw.new_key("team-crash")
    stop, done = threading.Event(), []
    workers = [threading.Thread(target=complete_answers, args=(gw, key, stop, done)) for _ in range(4)]
    for w in workers:
        w.start()
    wait_until(lambda: len(done) >= 60, timeout=30, interval=0.05, what="60 answers")
    gw.kill()
    stop.set()
    for w in workers:
        w.join()
    assert len(done) >= 60

    db = sqlite3.connect(tmp_path / "gw" / "costgate.db")
    assert db.execute("SELECT count(*) FROM ledger").fetchone()[0] == 0  # nothing was flushed before the kill

    gw.start()  # recovery replays the dead process's journal
    gw.stop()
    ids = {r[0] for r in db.execute("SELECT request_id FROM ledger")}
    assert set(done) <= ids
    assert db.execute("SELECT count(*) FROM ledger").fetchone()[0] == len(ids)  # no duplicates
    assert not list((tmp_path / "gw" / "data" / "journal").glob("*.jsonl"))  # replayed journals are gone
