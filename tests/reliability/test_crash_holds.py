"""A crash must not leave money reserved (issue 16, item 3), against the real Redis: a gateway
SIGKILLed with 4 streams in flight. Restarted on its data dir, it releases their holds at
once and charges what they relayed from its journal; never restarted, another replica
reclaims the holds when the dead one's lease ends and charges what they relayed from the
checkpoints the dead one left on the holds (issue 24, item 8), within one checkpoint of what
the provider streamed; a later restart on the dead one's data dir charges nothing twice."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from tests.gateway.budget_support import fresh_postgres, redis_prefix
from tests.support import FakeUpstream, GatewayProcess, model, wait_until

pytestmark = pytest.mark.slow  # boots processes: not in the fast lane

PRICE = "10"  # dollars per million tokens, in and out: a 400-token worst case holds $0.004
LEASE_S = 2
WORDS = 200  # the drip model streams one word every 0.2 s: a 40 s answer, cut by the kill
NO_CACHE = {"x-costgate-cache": "no-cache, no-store"}


def config(fake: FakeUpstream, prefix: str, **extra: Any) -> dict[str, Any]:
    return {
        "models": [
            model("drip", "drip", fake.url, PRICE, PRICE),
            model("small", "echo-small", fake.url, PRICE, PRICE),
            model("slow", "slow", fake.url, PRICE, PRICE),  # answers whole, after 2 s
        ],
        "redis_url": "redis://127.0.0.1:6379/5",
        "budgets": {
            "backend": "redis",
            "redis_prefix": prefix,
            "refresh_s": 0,
            "lease_s": LEASE_S,
            "journal_every_chunks": 4,
        },
        **extra,
    }


def body(i: int, stream: bool, model_name: str = "drip", word: str | None = None) -> dict[str, Any]:
    words = " ".join(word or f"w{i}" for _ in range(WORDS))
    return {
        "model": model_name,
        "stream": stream,
        "max_tokens": WORDS,
        "messages": [{"role": "user", "content": words}],
    }


class Stream(threading.Thread):
    """A client reading a slow stream until the gateway dies under it."""

    def __init__(self, gw: GatewayProcess, key: str, i: int, word: str | None = None) -> None:
        super().__init__(daemon=True)
        self.gw, self.key, self.i, self.word = gw, key, i, word
        self.request_id: str | None = None
        self.chunks = 0
        self.flowing = threading.Event()

    def run(self) -> None:
        headers = {"authorization": f"Bearer {self.key}", **NO_CACHE}
        try:
            with httpx.stream(
                "POST",
                self.gw.url + "/v1/chat/completions",
                json=body(self.i, True, word=self.word),
                headers=headers,
                timeout=60,
            ) as response:
                self.request_id = response.headers["x-costgate-request-id"]
                for line in response.iter_lines():
                    if line.startswith("data: {"):
                        self.chunks += 1
                        if self.chunks >= 6:  # a few journal lines written (every 4 chunks)
                            self.flowing.set()
        except httpx.HTTPError:
            pass  # the gateway was killed under it


def wait_for(what: str, check: Callable[[], bool], deadline_s: float = 30) -> None:
    wait_until(check, timeout=deadline_s, interval=0.1, what=what)


def budget(gw: GatewayProcess) -> dict[str, Any]:
    (found,) = gw.admin("GET", "/admin/budgets").json()["data"]
    return found


def ask(gw: GatewayProcess, key: str, i: int) -> int:
    return httpx.post(
        gw.url + "/v1/chat/completions",
        json=body(i, False, "small"),
        timeout=30,
        headers={"authorization": f"Bearer {key}", **NO_CACHE},
    ).status_code


def four_streams_holding_the_budget(
    gw: GatewayProcess, key: str, team: str, word: str | None = None
) -> tuple[list[Stream], Decimal]:
    """4 streams in flight, the team's budget set so that their holds leave no room for a 5th."""
    gw.admin("PUT", "/admin/budgets", json={"scope": "team", "id": team, "amount_usd": "1", "period": "daily"})
    streams = [Stream(gw, key, i, word) for i in range(4)]
    for s in streams:
        s.start()
    for s in streams:
        assert s.flowing.wait(30), "the stream did not flow"
    held = Decimal(budget(gw)["reserved_usd"])
    assert held > 0
    amount = Decimal(budget(gw)["spent_usd"]) + held + held / 8  # room for half a request more
    assert (
        gw.admin(
            "PUT", "/admin/budgets", json={"scope": "team", "id": team, "amount_usd": str(amount), "period": "daily"}
        ).status_code
        == 200
    )
    return streams, held


def partial_rows(db: sqlite3.Connection, gw: GatewayProcess, ids: list[str]) -> list[tuple]:
    gw.spend()  # flushes the ledger
    marks = ",".join("?" * len(ids))
    return db.execute(
        f"SELECT request_id, status, completion_tokens, cost_pusd FROM ledger WHERE request_id IN ({marks})", ids
    ).fetchall()


@pytest.fixture
def prefix() -> Iterator[str]:
    with redis_prefix() as p:
        yield p


def test_sigkill_with_streams_in_flight_then_restart_releases_the_holds_and_charges_them(
    tmp_path: Path, fake_upstream: FakeUpstream, prefix: str
) -> None:
    gw = GatewayProcess(config(fake_upstream, prefix), tmp_path / "gw")
    try:
        key = gw.new_key("team-crash")
        streams, held = four_streams_holding_the_budget(gw, key, "team-crash")
        assert ask(gw, key, 99) == 402  # the 4 holds leave no room
        ids = [s.request_id for s in streams]
        gw.kill()
        for s in streams:
            s.join(10)

        gw.start()  # a new replica on the same data dir: its journal's streams are charged
        wait_for("the dead replica's holds are released", lambda: Decimal(budget(gw)["reserved_usd"]) == 0, 15)
        wait_for("a new request is admitted", lambda: ask(gw, key, 100) == 200, 15)
        db = sqlite3.connect(tmp_path / "gw" / "costgate.db")
        rows = partial_rows(db, gw, ids)
        assert len(rows) == 4 and all(status == 500 and tokens > 0 and cost > 0 for _, status, tokens, cost in rows)
        # each charged for what was relayed: more than its prompt, less than its worst case
        partial = sum(Decimal(cost) for *_, cost in rows) / Decimal(10**12)
        assert partial < held
        ledger_total = Decimal(gw.spend()["total_usd"])
        assert Decimal(budget(gw)["spent_usd"]) == ledger_total  # the counters hold each cost once
        assert gw.proc is not None  # the dead process's stream journal is gone; the live one's remains
        journals = [p.name for p in (tmp_path / "gw" / "data" / "journal").glob("streams-*.jsonl")]
        assert all(name.startswith(f"streams-{gw.proc.pid}-") for name in journals), journals
    finally:
        gw.stop()


@pytest.mark.slow
def test_a_replica_that_never_comes_back_has_its_streams_charged_by_another(
    tmp_path: Path, fake_upstream: FakeUpstream, prefix: str
) -> None:
    """Its holds go when its lease ends, and the replica that reclaims them charges each stream
    what its last checkpoint saw relayed: the provider's bill within one checkpoint's tokens."""
    with fresh_postgres() as pg:
        a = GatewayProcess(config(fake_upstream, prefix, database_url=pg), tmp_path / "a")
        b = GatewayProcess(config(fake_upstream, prefix, database_url=pg), tmp_path / "b")
        try:
            key = a.new_key("team-lease")
            sent_before = fake_upstream.stats().get("sent:drip", 0)
            # "hello" is one token to the gateway's tokenizer and one word to the fake's bill
            streams, _held = four_streams_holding_the_budget(a, key, "team-lease", word="hello")
            assert ask(b, key, 99) == 402  # replica a's holds bind replica b too
            ids = [s.request_id for s in streams]
            spent_before = Decimal(budget(b)["spent_usd"])
            a.kill()
            for s in streams:
                s.join(10)
            # b gets the holds back once a's lease ends: before refusing, and by its own reclaim
            wait_for("b admits a new request", lambda: ask(b, key, 100) == 200, 3 * LEASE_S + 10)
            wait_for("b's view shows nothing held", lambda: Decimal(budget(b)["reserved_usd"]) == 0, 3 * LEASE_S + 10)
            wait_for("b charged a's streams", lambda: len(charged(b, pg, ids)) == 4, 3 * LEASE_S + 10)
            rows = stream_rows(pg, ids)
            # The provider billed each stream WORDS prompt tokens and the tokens it sent before
            # the connection died (one a chunk). The prompt is charged at the count its hold
            # made (a bound no smaller than the bill: fail-closed); tiktoken counts "echo:" as
            # two. What goes uncharged is at most one checkpoint (4 chunks) a stream (and the
            # chunk in flight when the replica died).
            sent = fake_upstream.stats()["sent:drip"] - sent_before
            every = 4  # journal_every_chunks
            prompts = sum(rows[i][1] for i in ids)
            completions = sum(rows[i][2] for i in ids)
            assert all(rows[i][0] == 500 for i in ids)
            assert 4 * WORDS <= prompts <= 4 * 2 * WORDS
            assert sent - 4 * (every + 1) <= completions <= sent + 4, (sent, completions)
            assert all(cost == (p + c) * int(PRICE) * 10**6 for _, p, c, cost in rows.values())  # $10/Mtok
            charged_usd = sum(Decimal(rows[i][3]) for i in ids) / Decimal(10**12)
            asked_usd = Decimal(b.spend()["total_usd"]) - charged_usd  # b's own request after the kill
            spent = Decimal(budget(b)["spent_usd"])
            assert spent_before == 0 and spent == charged_usd + asked_usd  # the budget counts them once
            a.start()  # a process on a's data dir again: its journal finds them charged already
            assert Decimal(budget(b)["spent_usd"]) == spent == Decimal(b.spend()["total_usd"])  # nothing twice
            assert Decimal(budget(b)["reserved_usd"]) == 0
        finally:
            a.stop()
            b.stop()


@pytest.mark.slow
def test_a_whole_answer_in_flight_on_a_replica_that_dies_is_charged_its_hold(
    tmp_path: Path, fake_upstream: FakeUpstream, prefix: str
) -> None:
    """Nothing says what a whole (not streamed) answer in flight had cost when its replica died:
    the upstream may have answered and billed it. The replica that reclaims the hold charges it
    whole (fail-closed), from the checkpoint the hold was admitted with."""
    with fresh_postgres() as pg:
        a = GatewayProcess(config(fake_upstream, prefix, database_url=pg), tmp_path / "a")
        b = GatewayProcess(config(fake_upstream, prefix, database_url=pg), tmp_path / "b")
        try:
            key = a.new_key("team-whole")
            a.admin(
                "PUT",
                "/admin/budgets",
                json={"scope": "team", "id": "team-whole", "amount_usd": "1", "period": "daily"},
            )
            slow = body(0, False, "slow", word="hello")

            def ask_slow() -> None:
                headers = {"authorization": f"Bearer {key}", **NO_CACHE}
                try:
                    httpx.post(a.url + "/v1/chat/completions", json=slow, headers=headers, timeout=30)
                except httpx.HTTPError:
                    pass  # killed under it

            asker = threading.Thread(target=ask_slow, daemon=True)
            asker.start()
            wait_for("the hold is made", lambda: Decimal(budget(b)["reserved_usd"]) > 0, 10)
            held = Decimal(budget(b)["reserved_usd"])
            a.kill()
            asker.join(10)
            wait_for("b's view shows nothing held", lambda: Decimal(budget(b)["reserved_usd"]) == 0, 3 * LEASE_S + 10)
            wait_for("b charged the hold", lambda: Decimal(b.spend()["total_usd"]) == held, 3 * LEASE_S + 10)
            assert Decimal(budget(b)["spent_usd"]) == held  # the budget too
            assert [r["group"] for r in b.spend("model")["rows"]] == ["slow"]  # one row, the model asked
        finally:
            a.stop()
            b.stop()


def stream_rows(pg_url: str, ids: list[str]) -> dict[str, tuple[int, int, int, int]]:
    async def query() -> dict[str, tuple[int, int, int, int]]:
        conn = await asyncpg.connect(pg_url)
        try:
            found = await conn.fetch(
                "SELECT request_id, status, prompt_tokens, completion_tokens, cost_pusd FROM ledger"
                " WHERE request_id = ANY($1::text[])",
                ids,
            )
            return {r["request_id"]: (r[1], r[2], r[3], r[4]) for r in found}
        finally:
            await conn.close()

    return asyncio.run(query())


def charged(gw: GatewayProcess, pg_url: str, ids: list[str]) -> list[str]:
    """Which of these requests have a ledger row."""

    async def query() -> list[str]:
        conn = await asyncpg.connect(pg_url)
        try:
            return [
                r["request_id"]
                for r in await conn.fetch("SELECT request_id FROM ledger WHERE request_id = ANY($1::text[])", ids)
            ]
        finally:
            await conn.close()

    gw.spend()  # flushes the ledger
    return asyncio.run(query())
