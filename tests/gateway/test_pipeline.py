"""The pipeline runner with synthetic stages: order, short-circuit, and settling that always
runs — after errors, after bugs, after a settle that itself fails."""

from __future__ import annotations

import orjson
import pytest
from starlette.responses import Response, StreamingResponse

from gateway.core.asked import Asked
from gateway.core.context import Endpoint, RequestContext
from gateway.core.errors import BudgetExceeded
from gateway.core.sse import SSE_DONE
from gateway.pipeline import Pipeline


class Probe:
    def __init__(
        self,
        name: str,
        log: list[str],
        answer: Response | None = None,
        fail: Exception | None = None,
        settle_fails: bool = False,
    ) -> None:
        self.name, self.log, self.answer, self.fail, self.settle_fails = name, log, answer, fail, settle_fails

    async def __call__(self, ctx: RequestContext) -> Response | None:
        self.log.append(f"call {self.name}")
        if self.fail is not None:
            raise self.fail
        return self.answer

    async def settle(self, ctx: RequestContext) -> None:
        self.log.append(f"settle {self.name} {ctx.outcome.status_code}")
        if self.settle_fails:
            raise RuntimeError("settle broke")


def ctx() -> RequestContext:
    return RequestContext(
        request_id="req_1", endpoint=Endpoint.CHAT, body={}, api_key=None, headers={}, asked=Asked("m")
    )


async def test_stages_run_in_order_and_settle_in_reverse() -> None:
    log: list[str] = []
    stages = [Probe("a", log), Probe("b", log), Probe("route", log, answer=Response(b"{}")), Probe("never", log)]
    response = await Pipeline(stages).handle(ctx())
    assert response.status_code == 200 and response.headers["x-costgate-cost-usd"] == "0"
    assert log == ["call a", "call b", "call route", "settle route 200", "settle b 200", "settle a 200"]


@pytest.mark.parametrize("fail, status", [(BudgetExceeded("over budget"), 402), (KeyError("bug"), 500)])
async def test_a_refusal_or_a_bug_still_settles_every_entered_stage(fail: Exception, status: int) -> None:
    log: list[str] = []
    stages = [Probe("record", log), Probe("budget", log), Probe("broken", log, fail=fail), Probe("route", log)]
    response = await Pipeline(stages).handle(ctx())
    assert response.status_code == status
    assert set(orjson.loads(response.body)["error"]) >= {"message", "type", "code"}
    assert log[-3:] == [f"settle broken {status}", f"settle budget {status}", f"settle record {status}"]
    assert "call route" not in log


async def test_a_failing_settle_does_not_skip_the_others() -> None:
    log: list[str] = []
    stages = [Probe("record", log), Probe("budget", log, settle_fails=True), Probe("route", log, Response(b"{}"))]
    await Pipeline(stages).handle(ctx())
    assert log[-1] == "settle record 200"


async def test_a_stream_settles_before_its_done_marker_leaves() -> None:
    log: list[str] = []

    async def body():
        yield b"data: {}\n\n"
        log.append("body done")
        yield SSE_DONE

    stream = StreamingResponse(body(), media_type="text/event-stream")
    stages = [Probe("record", log), Probe("route", log, answer=stream)]
    response = await Pipeline(stages).handle(ctx())
    assert "x-costgate-cost-usd" not in response.headers  # a streamed miss reports its cost in the stream
    chunks = []
    async for chunk in response.body_iterator:
        chunks.append((chunk, list(log)))
    assert chunks[-1][0] == SSE_DONE
    assert chunks[-1][1][-1] == "settle record 200"  # the ledger row was written before [DONE] left
