"""The Batch API through a running gateway with the official openai SDK: files, batches, the
discount, cancellation, and a restart in the middle of a batch."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import httpx
import openai
import pytest

from tests.support import FakeUpstream, GatewayProcess, model, wait_until

pytestmark = pytest.mark.slow  # boots processes: not in the fast lane

SMALL_IN, SMALL_OUT = Decimal("0.15") / 10**6, Decimal("0.6") / 10**6


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream) -> Iterator[GatewayProcess]:
    config = {
        "models": [
            model("small", "echo-small", fake_upstream.url, "0.15", "0.6"),
            model("slow", "slow", fake_upstream.url, timeout_s=30, max_retries=0),
        ],
        "batch": {"discount": "0.5", "concurrency": 2, "poll_interval_s": 0.2, "lease_s": 2},
    }
    g = GatewayProcess(config, tmp_path_factory.mktemp("batch-gw"))
    yield g
    g.stop()


def jsonl(lines: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


def chat_line(custom_id: str, text: str, model_name: str = "small") -> dict[str, Any]:
    return {
        "custom_id": custom_id,
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": model_name, "messages": [{"role": "user", "content": text}]},
    }


def submit(client: openai.OpenAI, lines: list[dict[str, Any]]) -> Any:
    f = client.files.create(file=("input.jsonl", io.BytesIO(jsonl(lines))), purpose="batch")
    return client.batches.create(
        input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h", metadata={"job": "test"}
    )


def wait_for(client: openai.OpenAI, batch_id: str, statuses: set[str], timeout: float = 60.0) -> Any:
    def reached() -> Any:
        batch = client.batches.retrieve(batch_id)
        return batch if batch.status in statuses else None

    return wait_until(reached, timeout, interval=0.1, what=f"batch {batch_id} {statuses}")


def read_lines(client: openai.OpenAI, file_id: str | None) -> list[dict[str, Any]]:
    if file_id is None:
        return []
    return [json.loads(line) for line in client.files.content(file_id).content.splitlines() if line]


def test_batch_lines_on_an_external_api_pay_what_the_provider_bills(gw: GatewayProcess) -> None:
    """`small` is an OpenAI-compatible upstream without a batch price: each line runs there at
    list price, so it is charged list price and nothing is booked as saved (issue 26: the lane's
    discount was booked for calls the provider billed in full)."""
    client = gw.client(gw.new_key("batch-team-1"))
    lines = [chat_line(f"req-{i}", f"batch question number {i}") for i in range(5)]
    lines.append(chat_line("bad-model", "x", model_name="no-such-model"))
    batch = submit(client, lines)
    assert batch.status == "in_progress" and batch.request_counts.total == 6
    assert batch.metadata == {"job": "test"}
    done = wait_for(client, batch.id, {"completed"})
    assert (done.request_counts.completed, done.request_counts.failed) == (5, 1)
    assert done.completed_at is not None and done.in_progress_at is not None

    output = read_lines(client, done.output_file_id)
    assert [o["custom_id"] for o in output] == [f"req-{i}" for i in range(5)]  # input order
    expected = Decimal(0)
    for i, o in enumerate(output):
        assert o["response"]["status_code"] == 200 and o["id"].startswith("batch_req_")
        body = o["response"]["body"]
        assert body["choices"][0]["message"]["content"] == f"echo: batch question number {i}"
        u = body["usage"]
        expected += u["prompt_tokens"] * SMALL_IN + u["completion_tokens"] * SMALL_OUT
    errors = read_lines(client, done.error_file_id)
    assert len(errors) == 1 and errors[0]["custom_id"] == "bad-model"
    assert errors[0]["response"]["status_code"] == 404
    assert errors[0]["response"]["body"]["error"]["code"] == "model_not_found"

    assert expected > 0 and Decimal(done.model_extra["cost_usd"]) == expected
    assert done.usage is not None and done.usage.input_tokens > 0
    team = {r["group"]: r for r in gw.spend("team")["rows"]}
    rows = [r for r in team.values() if r["requests"] == 6]  # five answers and the refused line
    assert len(rows) == 1
    assert Decimal(rows[0]["cost_usd"]) == expected  # what the provider billed...
    assert Decimal(rows[0]["saved_usd"]) == 0  # ...and no discount it never gave
    assert Decimal(rows[0]["provider_batch_saved_usd"]) == 0
    tags = {r["group"]: r for r in gw.spend("tag")["rows"]}
    assert "lane:batch" in tags
    metrics = httpx.get(gw.url + "/metrics").text
    ok = [line for line in metrics.splitlines() if line.startswith('costgate_batch_lines_total{outcome="ok"}')]
    assert ok and float(ok[0].split()[-1]) >= 5


def test_files_api(gw: GatewayProcess) -> None:
    client = gw.client(gw.new_key("batch-team-2"))
    f = client.files.create(file=("in.jsonl", io.BytesIO(jsonl([chat_line("a", "hi")]))), purpose="batch")
    assert f.purpose == "batch" and f.bytes > 0 and f.filename == "in.jsonl" and f.status == "processed"
    assert client.files.retrieve(f.id).id == f.id
    assert f.id in [x.id for x in client.files.list(purpose="batch")]
    assert client.files.content(f.id).content == jsonl([chat_line("a", "hi")])

    other = gw.client(gw.new_key("batch-team-other"))
    with pytest.raises(openai.NotFoundError):
        other.files.retrieve(f.id)  # another team's file does not exist for it
    with pytest.raises(openai.NotFoundError):
        other.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h")
    with pytest.raises(openai.BadRequestError):
        client.files.create(file=("x.jsonl", io.BytesIO(b"{}")), purpose="fine-tune")

    deleted = client.files.delete(f.id)
    assert deleted.deleted and deleted.id == f.id
    with pytest.raises(openai.NotFoundError):
        client.files.retrieve(f.id)


@pytest.mark.parametrize(
    "content, code",
    [
        (b"not json\n", "invalid_json_line"),
        (jsonl([chat_line("a", "x"), chat_line("a", "y")]), "duplicate_custom_id"),
        (jsonl([{**chat_line("a", "x"), "url": "/v1/embeddings"}]), "mismatched_endpoint"),
        (jsonl([{"method": "POST", "url": "/v1/chat/completions", "body": {}}]), "invalid_custom_id"),
        (b"\n\n", "empty_file"),
    ],
)
def test_invalid_input_fails_the_batch(gw: GatewayProcess, content: bytes, code: str) -> None:
    client = gw.client(gw.new_key("batch-team-3"))
    f = client.files.create(file=("bad.jsonl", io.BytesIO(content)), purpose="batch")
    batch = client.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="24h")
    assert batch.status == "failed" and batch.failed_at is not None
    assert batch.errors is not None and batch.errors.data[0].code == code


def test_bad_create_requests_are_400(gw: GatewayProcess) -> None:
    client = gw.client(gw.new_key("batch-team-4"))
    f = client.files.create(file=("in.jsonl", io.BytesIO(jsonl([chat_line("a", "x")]))), purpose="batch")
    with pytest.raises(openai.BadRequestError):
        client.batches.create(input_file_id=f.id, endpoint="/v1/images/generations", completion_window="24h")
    with pytest.raises(openai.BadRequestError):
        client.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions", completion_window="soon")  # type: ignore[arg-type]
    with pytest.raises(openai.AuthenticationError):
        gw.client("sk-cg-wrong").batches.list()


def test_cancel_stops_taking_lines(gw: GatewayProcess) -> None:
    client = gw.client(gw.new_key("batch-team-5"))
    batch = submit(client, [chat_line(f"s-{i}", f"slow {i}", "slow") for i in range(8)])
    f_in = batch.input_file_id
    with pytest.raises(openai.BadRequestError):
        client.files.delete(f_in)  # an unfinished batch reads it
    cancelling = client.batches.cancel(batch.id)
    assert cancelling.status in ("cancelling", "cancelled")
    done = wait_for(client, batch.id, {"cancelled"})
    assert done.cancelled_at is not None and done.request_counts.completed < 8
    assert len(read_lines(client, done.output_file_id)) == done.request_counts.completed
    assert [b.id for b in client.batches.list(limit=1)] == [batch.id]
    with pytest.raises(openai.BadRequestError):
        client.batches.cancel(submit_and_finish(client).id)
    assert client.files.delete(f_in).deleted


def submit_and_finish(client: openai.OpenAI) -> Any:
    return wait_for(client, submit(client, [chat_line("one", "x")]).id, {"completed"})


@pytest.mark.parametrize("how", ["kill", "term"])
def test_restart_in_the_middle_of_a_batch(gw: GatewayProcess, fake_upstream: FakeUpstream, how: str) -> None:
    key = gw.new_key(f"batch-team-6-{how}")
    client = gw.client(key)
    n = 4
    before = fake_upstream.stats().get("slow", 0)
    batch = submit(client, [chat_line(f"r-{i}", f"restart line {i}", "slow") for i in range(n)])
    wait_until(lambda: client.batches.retrieve(batch.id).request_counts.completed >= 2, timeout=30, interval=0.1)
    if how == "kill":
        gw.kill()  # SIGKILL: no clean shutdown, lines in flight are lost with the process
    else:
        gw.stop()  # SIGTERM: lines in flight finish and are kept
    gw.start()
    client = gw.client(key)
    done = wait_for(client, batch.id, {"completed"})
    assert done.request_counts.completed == n and done.request_counts.failed == 0
    output = read_lines(client, done.output_file_id)
    assert sorted(o["custom_id"] for o in output) == sorted(f"r-{i}" for i in range(n))  # each once
    for o in output:
        i = o["custom_id"].split("-")[1]
        assert o["response"]["body"]["choices"][0]["message"]["content"] == f"echo: restart line {i}"
    calls = fake_upstream.stats()["slow"] - before
    # killed: at most the lines in flight ran twice; stopped cleanly: every line ran once
    assert (n <= calls <= n + 2) if how == "kill" else calls == n
