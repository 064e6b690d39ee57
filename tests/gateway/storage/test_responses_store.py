"""Stored responses (gateway/storage/stored_responses.py) on a real SQLite database: a row reads back
as it was kept, expires after `ttl_s` (an injected clock, not a sleep), and a team past its
`max_team_bytes` loses its own oldest rows first, never another team's."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.apis.responses.response_chain import StoredResponse
from gateway.config.settings import ResponsesConfig
from gateway.storage.db import create_engine, create_tables
from gateway.storage.stored_responses import ResponseStore


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def stored(response_id: str, team_id: str, text: str = "hello", previous: str | None = None) -> StoredResponse:
    output = (
        {"id": "msg_1", "type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]},
    )
    return StoredResponse(
        response_id,
        team_id,
        previous,
        ({"role": "user", "content": "hi"},),
        output,
        {"id": response_id, "object": "response", "output": list(output)},
    )


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[tuple[ResponseStore, Clock]]:
    engine = create_engine(f"sqlite:///{tmp_path}/r.db")
    await create_tables(engine)
    clock = Clock()
    yield ResponseStore(engine, ResponsesConfig(ttl_s=60, max_team_bytes=2048), clock), clock
    await engine.dispose()


async def test_a_kept_response_reads_back_whole(store: tuple[ResponseStore, Clock]) -> None:
    responses, _ = store
    kept = stored("resp_1", "team_a", previous="resp_0")
    await responses.put(kept)
    assert await responses.get("resp_1") == kept
    assert await responses.get("resp_missing") is None
    await responses.delete("resp_1")
    assert await responses.get("resp_1") is None


async def test_a_response_expires_after_its_ttl(store: tuple[ResponseStore, Clock]) -> None:
    responses, clock = store
    await responses.put(stored("resp_1", "team_a"))
    clock.now += 59
    assert await responses.get("resp_1") is not None
    clock.now += 1
    assert await responses.get("resp_1") is None


async def test_a_team_over_its_size_cap_loses_its_own_oldest(store: tuple[ResponseStore, Clock]) -> None:
    responses, clock = store
    await responses.put(stored("resp_b", "team_b", "b" * 300))
    for i in range(6):  # ~700 bytes each against 2048: only the newest two or three fit
        clock.now += 1
        await responses.put(stored(f"resp_{i}", "team_a", str(i) * 300))
    kept = [i for i in range(6) if await responses.get(f"resp_{i}") is not None]
    assert kept[-1] == 5 and kept == list(range(kept[0], 6)) and len(kept) < 6
    assert await responses.get("resp_b") is not None
