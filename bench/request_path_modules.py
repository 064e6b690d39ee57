"""How many product modules one chat request runs through (issue 25: docs/architecture.md counts
them). The app is built in process over an httpx.MockTransport upstream, warmed by one request,
then a second chat completion (another question: no exact-cache hit) is traced with
sys.setprofile and threading.setprofile; every gateway/, policies/ or engine/ module whose code
ran during it is listed, by package. Also printed: the product modules on the call stack when
the upstream is called (the layers the call goes down through, helpers and the settle's
background work left out).

    python -m bench.request_path_modules [--stream]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import threading
from collections import defaultdict
from pathlib import Path
from types import FrameType
from typing import Any

import httpx
import orjson

from gateway.app import create_app
from gateway.config.settings import Settings
from gateway.service import Gateway

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("gateway", "policies", "engine")


STACK: list[str] = []  # the product modules on the stack at the traced request's upstream call, outermost first
TRACING = False  # set around the traced request: the walk up the stack is not cheap


def answer(request: httpx.Request) -> httpx.Response:
    if TRACING:
        STACK[:] = _modules_on_stack()
    body = orjson.loads(request.content)
    if body.get("stream"):
        chunks = [
            {"id": "x", "object": "chat.completion.chunk", "model": "m", "created": 0,
             "choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": None}]},
            {"id": "x", "object": "chat.completion.chunk", "model": "m", "created": 0,
             "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
             "usage": {"prompt_tokens": 9, "completion_tokens": 1, "total_tokens": 10}},
        ]  # fmt: skip
        text = "".join(f"data: {orjson.dumps(c).decode()}\n\n" for c in chunks) + "data: [DONE]\n\n"
        return httpx.Response(200, text=text, headers={"content-type": "text/event-stream"})
    return httpx.Response(
        200,
        json={
            "id": "x", "object": "chat.completion", "model": "m", "created": 0,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 9, "completion_tokens": 1, "total_tokens": 10},
        },
    )  # fmt: skip


def _modules_on_stack() -> list[str]:
    frame: FrameType | None = sys._getframe(2)
    found: list[str] = []
    while frame is not None:
        name = module_of(frame.f_code.co_filename)
        if name is not None and name not in found:
            found.append(name)
        frame = frame.f_back
    return found[::-1]


def module_of(filename: str) -> str | None:
    try:
        rel = Path(filename).resolve().relative_to(ROOT)
    except ValueError:
        return None
    if rel.parts[0] not in PACKAGES or rel.suffix != ".py":
        return None
    return ".".join(rel.with_suffix("").parts).removesuffix(".__init__")


async def traced_request(stream: bool) -> set[str]:
    work = Path(tempfile.mkdtemp())
    settings = Settings.model_validate(
        {
            "admin_key": "sk-cg-admin-path",
            "database_url": f"sqlite:///{work}/db.sqlite",
            "data_dir": str(work / "data"),
            "models": [{"name": "m", "provider": "openai", "api_base": "http://upstream.test/v1",
                        "price": {"input_per_mtok": "0.1", "output_per_mtok": "0.5"}}],
        }
    )  # fmt: skip
    app = create_app(settings, transport=httpx.MockTransport(answer))
    gateway: Gateway = app.state.gateway
    await gateway.start()
    await gateway.keys.create_team("t")
    _, secret = await gateway.keys.create_key("t")
    seen: set[str] = set()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            name = module_of(frame.f_code.co_filename)
            if name is not None:
                seen.add(name)

    headers = {"authorization": f"Bearer {secret}"}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw.test") as http:

        async def ask(question: str) -> None:
            body = {"model": "m", "stream": stream, "messages": [{"role": "user", "content": question}]}
            response = await http.post("/v1/chat/completions", json=body, headers=headers)
            response.raise_for_status()

        await ask("warm up")
        await asyncio.sleep(0.2)
        global TRACING
        TRACING = True
        threading.setprofile(profile)
        sys.setprofile(profile)
        try:
            await ask("What is the capital of France?")
            await asyncio.sleep(0.2)  # the settle's background writes
        finally:
            sys.setprofile(None)
            threading.setprofile(None)  # type: ignore[arg-type]
            TRACING = False
    await gateway.stop()
    return seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stream", action="store_true", help="a streamed chat completion")
    args = parser.parse_args()
    seen = asyncio.run(traced_request(args.stream))
    by_package: dict[str, list[str]] = defaultdict(list)
    for name in sorted(seen):
        package = name.rpartition(".")[0] or name
        by_package[package].append(name.rpartition(".")[2])
    for package, names in sorted(by_package.items()):
        print(f"{package:28} {len(names):3}  {' '.join(names)}")
    print(f"{len(seen)} product modules ran for one {'streamed ' if args.stream else ''}chat completion")
    print(f"{len(STACK)} on the call stack at the upstream call: {' > '.join(STACK)}")


if __name__ == "__main__":
    main()
