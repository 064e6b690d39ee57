"""A replica set in-process, its upstreams played by httpx.MockTransport: which replica each
call goes to, vLLM's priority field, the batch lane's admission, failover."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx
import orjson
import pytest

from engine.admission import Priority
from gateway.config.models_config import ModelConfig
from gateway.core.context import Endpoint
from gateway.core.errors import InvalidRequest, Unavailable
from gateway.providers.base import UpstreamCall
from gateway.providers.replicas import ReplicaSet, replica_set
from tests.support import wait_until, wait_until_async

pytestmark = pytest.mark.slow  # boots processes: not in the fast lane

A, B = "http://a.test/v1", "http://b.test/v1"


def answer(body: dict[str, Any]) -> httpx.Response:
    return httpx.Response(
        200,
        json={
            "id": "x",
            "object": "chat.completion",
            "model": body["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        },
    )


class Upstreams:
    """Records each call (host, body); `hold` keeps answers back until `release()`."""

    def __init__(self, fail: Callable[[str], httpx.Response | Exception | None] = lambda host: None) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.fail = fail
        self.gate: asyncio.Event | None = None

    def hold(self) -> None:
        self.gate = asyncio.Event()

    async def handler(self, request: httpx.Request) -> httpx.Response:
        body = orjson.loads(request.content)
        self.calls.append((request.url.host, body))
        failure = self.fail(request.url.host)
        if isinstance(failure, Exception):
            raise failure
        if failure is not None:
            return failure
        if self.gate is not None:
            await self.gate.wait()
        return answer(body)

    def hosts(self) -> list[str]:
        return [h[0] for h in self.calls]


def make(upstreams: Upstreams, **fields: Any) -> ReplicaSet:
    config = ModelConfig.model_validate(
        {"name": "m", "api_base": A, "replicas": [B], "price": {"input_per_mtok": 1, "output_per_mtok": 1}, **fields}
    )
    return replica_set(config, 100, httpx.MockTransport(upstreams.handler))


def chat(priority: Priority = Priority.INTERACTIVE, max_tokens: int = 10) -> UpstreamCall:
    return UpstreamCall(
        Endpoint.CHAT,
        {"model": "m", "max_tokens": max_tokens, "messages": [{"role": "user", "content": "hi"}]},
        priority=priority,
    )


async def until(condition: Callable[[], bool]) -> None:
    await wait_until_async(condition, timeout=10)


@pytest.mark.parametrize(
    "provider, forward, priority, expected",
    [
        ("local", None, Priority.REALTIME, -1),
        ("local", None, Priority.INTERACTIVE, 0),
        ("local", None, Priority.BATCH, 1),
        ("openai", None, Priority.BATCH, None),  # a plain OpenAI-compatible host gets no extra field
        ("openai", True, Priority.REALTIME, -1),
        ("local", False, Priority.REALTIME, None),
    ],
)
async def test_vllm_priority_field(
    provider: str, forward: bool | None, priority: Priority, expected: int | None
) -> None:
    ups = Upstreams()
    rs = make(ups, provider=provider, admission={"forward_priority": forward})
    await rs.complete(chat(priority))
    assert ups.calls[0][1].get("priority") == expected
    await rs.aclose()


async def test_fewest_outstanding_tokens() -> None:
    ups = Upstreams()
    rs = make(ups)
    ups.hold()
    big = asyncio.create_task(rs.complete(chat(max_tokens=1000)))
    await until(lambda: len(ups.calls) == 1)
    small = [asyncio.create_task(rs.complete(chat(max_tokens=10))) for _ in range(3)]
    await until(lambda: len(ups.calls) == 4)
    assert ups.hosts() == ["a.test", "b.test", "b.test", "b.test"]  # 3 small ones weigh less than the big one
    assert rs.book.replicas[0].tokens > rs.book.replicas[1].tokens > 0
    assert ups.gate is not None
    ups.gate.set()
    await asyncio.gather(big, *small)
    assert rs.book.load(*Priority) == 0  # every weight released
    await rs.aclose()


async def test_batch_waits_for_idle_capacity() -> None:
    ups = Upstreams()
    rs = make(ups, admission={"batch_idle_tokens": 0})
    ups.hold()
    interactive = asyncio.create_task(rs.complete(chat(Priority.INTERACTIVE)))
    await until(lambda: len(ups.calls) == 1)
    batch = asyncio.create_task(rs.complete(chat(Priority.BATCH)))
    realtime = asyncio.create_task(rs.complete(chat(Priority.REALTIME)))
    await until(lambda: len(ups.calls) == 2)
    # The batch task ran first, so its admission was decided (synchronously) before realtime's
    # call went out, and nothing has been released since: it waits, holding no ticket.
    assert len(ups.calls) == 2 and not batch.done()  # the batch call waits; realtime went through
    assert rs.book.load(Priority.BATCH) == 0 and rs.book.load(Priority.REALTIME) > 0
    assert ups.gate is not None
    ups.gate.set()
    await asyncio.gather(interactive, realtime, batch)
    assert len(ups.calls) == 3 and rs.book.load(*Priority) == 0
    await rs.aclose()


async def test_batch_gives_up_after_its_wait() -> None:
    ups = Upstreams()
    rs = make(ups, admission={"batch_max_wait_s": 0.05})
    ups.hold()
    interactive = asyncio.create_task(rs.complete(chat()))
    await until(lambda: len(ups.calls) == 1)
    with pytest.raises(Unavailable) as err:
        await rs.complete(chat(Priority.BATCH))
    assert err.value.status == 503 and err.value.retry_after is not None
    assert ups.gate is not None
    ups.gate.set()
    await interactive
    assert rs.book.load(*Priority) == 0
    await rs.aclose()


@pytest.mark.parametrize(
    "failure, marked_down",
    [
        (httpx.ConnectError("refused"), True),
        (httpx.RemoteProtocolError("Server disconnected without sending a response."), True),
        (httpx.Response(503, json={"error": {"message": "overloaded"}}), False),
        (httpx.Response(429, json={"error": {"message": "slow down"}}), False),
    ],
)
async def test_failover_to_another_replica(failure: Any, marked_down: bool) -> None:
    ups = Upstreams(fail=lambda host: failure if host == "a.test" else None)
    rs = make(ups)
    completion = await rs.complete(chat())
    assert completion.body["choices"][0]["message"]["content"] == "ok"
    assert ups.hosts() == ["a.test", "b.test"]
    await rs.complete(chat())
    # a dead replica is skipped during its cooldown; one that answered with an error is not
    assert ups.hosts()[2:] == (["b.test"] if marked_down else ["a.test", "b.test"])
    assert rs.book.load(*Priority) == 0
    await rs.aclose()


async def test_client_errors_and_total_failure_are_not_hidden() -> None:
    ups = Upstreams(fail=lambda host: httpx.Response(400, json={"error": {"message": "bad"}}))
    rs = make(ups)
    with pytest.raises(InvalidRequest):
        await rs.complete(chat())
    assert len(ups.calls) == 1  # the client's fault: not sent again
    ups.fail = lambda host: httpx.ConnectError("refused")
    with pytest.raises(Exception) as err:
        await rs.complete(chat())
    assert getattr(err.value, "status", None) == 502 and rs.book.load(*Priority) == 0
    await rs.aclose()


async def test_stream_holds_its_weight_until_closed() -> None:
    def sse(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200,
            headers={"content-type": "text/event-stream"},
            content=b'data: {"choices": [{"index": 0, "delta": {"content": "hi"}}]}\n\ndata: [DONE]\n\n',
        )

    config = ModelConfig.model_validate({"name": "m", "api_base": A, "replicas": [B]})
    rs = replica_set(config, 100, httpx.MockTransport(sse))
    stream = await rs.open_stream(UpstreamCall(Endpoint.CHAT, chat().body, True))
    assert rs.book.load(*Priority) > 0
    events = [e async for e in stream]
    assert len(events) == 1 and rs.book.load(*Priority) == 0
    await stream.aclose()  # closing again releases nothing twice
    assert rs.book.load(*Priority) == 0
    await rs.aclose()


# End to end: two fake upstream processes as the replicas of one model, one killed mid-run.


def test_no_request_is_lost_when_a_replica_dies(tmp_path_factory: pytest.TempPathFactory, fake_upstream: Any) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from tests.support import FakeUpstream, GatewayProcess, model

    logs = tmp_path_factory.mktemp("replicas")
    first, second = FakeUpstream(logs), fake_upstream  # the session's fake is the survivor
    before = second.stats().get("slow", 0)
    config = {
        "models": [model("pool", "slow", first.url, replicas=[second.url], timeout_s=30, admission={"cooldown_s": 60})]
    }
    gw = GatewayProcess(config, logs / "gw")
    try:
        client = gw.client(gw.new_key("replica-team"))

        def ask(i: int) -> str:
            completion = client.chat.completions.create(
                model="pool", messages=[{"role": "user", "content": f"question {i}"}]
            )
            return completion.choices[0].message.content or ""

        with ThreadPoolExecutor(8) as pool:
            answers = [pool.submit(ask, i) for i in range(8)]
            # both replicas hold 4 requests (fewest outstanding tokens)
            wait_until(
                lambda: first.stats().get("slow", 0) >= 4 and second.stats().get("slow", 0) - before >= 4,
                timeout=10,
                what="4 requests in flight on each replica",
            )
            first.proc.kill()  # the replica dies with 4 requests in flight
            results = [a.result(timeout=30) for a in answers]
        assert sorted(results) == sorted(f"echo: question {i}" for i in range(8))  # none lost
        assert second.stats()["slow"] - before == 8  # its own 4 and the dead replica's 4
        assert ask(99) == "echo: question 99" and second.stats()["slow"] - before == 9  # the dead one is skipped
    finally:
        gw.stop()
        first.stop()
