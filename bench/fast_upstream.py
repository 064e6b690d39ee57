"""A minimal, fast fake OpenAI upstream for the overhead benchmark (bench only, never tests).

Raw asyncio protocol + httptools parser on uvloop: every POST gets the same small chat
completion (with usage), every GET a model list. It does nothing per request but parse and
write, so that the load generator and this server together stay far from saturating the
core they share, and what is measured is the proxy in front of it.

    python bench/fast_upstream.py --port 9100
"""

from __future__ import annotations

import argparse
import asyncio

import httptools
import orjson
import uvloop

COMPLETION = orjson.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "bench-model",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": "Hello! How can I help you today?"},
            }
        ],
        "usage": {"prompt_tokens": 12, "completion_tokens": 9, "total_tokens": 21},
    }
)
MODELS = orjson.dumps(
    {"object": "list", "data": [{"id": "bench-model", "object": "model", "created": 0, "owned_by": "bench"}]}
)


def _response(body: bytes) -> bytes:
    return (
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
        + str(len(body)).encode()
        + b"\r\n\r\n"
        + body
    )


POST_RESPONSE = _response(COMPLETION)
GET_RESPONSE = _response(MODELS)


class Upstream(asyncio.Protocol):
    def __init__(self) -> None:
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            assert self.transport is not None
            self.transport.write(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
            self.transport.close()

    def on_message_complete(self) -> None:
        assert self.transport is not None
        self.transport.write(GET_RESPONSE if self.parser.get_method() == b"GET" else POST_RESPONSE)
        if not self.parser.should_keep_alive():
            self.transport.close()


async def serve(host: str, port: int) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(Upstream, host, port, backlog=1024)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9100)
    args = parser.parse_args()
    uvloop.run(serve(args.host, args.port))


if __name__ == "__main__":
    main()
