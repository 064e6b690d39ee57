"""The floor under any proxy built on costgate's HTTP stack (issue 28): a relay with no gateway
in it, on the same parts `costgate serve` runs — uvicorn on uvloop with httptools, a Starlette
route, and the gateway's own upstream client (gateway/providers/fast_post.py: one pooled aiohttp
session) — that reads the client's body, posts it upstream and hands back the answer, a stream
chunk by chunk. No key, no ledger, no policy.

`bench/overhead.py --floor` measures it beside costgate in the same run: what costgate adds on
top of the floor is the gateway's own work; the floor itself is the stack's (two HTTP parsers,
the event loop's wake-ups, one more loopback hop), which no change inside the pipeline can lower.

    python bench/floor_proxy.py --port 8099 --upstream http://127.0.0.1:8098/v1
"""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from gateway.providers.fast_post import FastPost, finish, read


def build_app(upstream: str) -> Starlette:
    client = FastPost(upstream, {}, timeout_s=600, connect_timeout_s=10)

    async def chat(request: Request) -> Response:
        answer = await client.open("/chat/completions", await request.body())
        if answer.content_type != "text/event-stream":
            payload = await read(answer)
            await finish(answer)
            return Response(payload, status_code=answer.status, media_type="application/json")

        async def chunks() -> AsyncIterator[bytes]:
            try:
                async for chunk in answer.content.iter_any():
                    yield chunk
            finally:
                await finish(answer)

        return StreamingResponse(chunks(), status_code=answer.status, media_type="text/event-stream")

    async def health(request: Request) -> Response:
        return PlainTextResponse("ok")

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"]), Route("/healthz", health)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True, help="the upstream's base URL, ending in /v1")
    args = parser.parse_args()
    uvicorn.run(
        build_app(args.upstream),
        host="127.0.0.1",
        port=args.port,
        loop="uvloop",
        http="httptools",
        access_log=False,
        log_level="warning",
    )


if __name__ == "__main__":
    main()
