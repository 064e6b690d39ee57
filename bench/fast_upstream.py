"""A minimal, fast fake OpenAI upstream for the overhead benchmark (bench only, never tests).

Raw asyncio protocol + httptools parser on uvloop: every POST gets the same small chat
completion (with usage), every GET a model list. It does nothing per request but parse and
write, so that the load generator and this server together stay far from saturating the
core they share, and what is measured is the proxy in front of it.

A POST with `"stream": true` is answered at once with the SSE headers, then one token every
`--token-interval-ms` (20) for `--tokens` (8) tokens, the finish chunk, the usage chunk when
`stream_options.include_usage` is asked, and [DONE] (chunked transfer encoding, keep-alive).

    python bench/fast_upstream.py --port 9100
"""

from __future__ import annotations

import argparse
import asyncio
import re

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
STREAM_HEADERS = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
STREAMING = re.compile(rb'"stream"\s*:\s*true')
WANTS_USAGE = re.compile(rb'"include_usage"\s*:\s*true')
TOKEN_MARK = b"tok"  # every streamed token's text starts with it (bench/overhead.py looks for it)


def _event(data: dict) -> bytes:
    line = b"data: " + orjson.dumps(data) + b"\n\n"
    return f"{len(line):x}".encode() + b"\r\n" + line + b"\r\n"


def _chunk(delta: dict, finish: str | None = None) -> bytes:
    base = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1_700_000_000}
    return _event({**base, "model": "bench-model", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


def stream_events(tokens: int, usage: bool) -> list[bytes]:
    """The chunks after the first token's: the other tokens, the finish, the usage, [DONE], the end."""
    tail = [_chunk({}, "stop")]
    if usage:
        base = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1_700_000_000}
        tail.append(
            _event(
                {
                    **base,
                    "model": "bench-model",
                    "choices": [],
                    "usage": {"prompt_tokens": 12, "completion_tokens": tokens, "total_tokens": 12 + tokens},
                }
            )
        )
    done = b"data: [DONE]\n\n"
    tail.append(f"{len(done):x}".encode() + b"\r\n" + done + b"\r\n0\r\n\r\n")
    return [_chunk({"role": "assistant", "content": f"tok{i} "}) for i in range(tokens)] + tail


class Upstream(asyncio.Protocol):
    tokens = 8
    interval_s = 0.02

    def __init__(self) -> None:
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.body = bytearray()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            assert self.transport is not None
            self.transport.write(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
            self.transport.close()

    def on_message_begin(self) -> None:
        self.body.clear()

    def on_body(self, body: bytes) -> None:
        self.body += body

    def on_message_complete(self) -> None:
        assert self.transport is not None
        if self.parser.get_method() == b"POST" and STREAMING.search(self.body):
            self.transport.write(STREAM_HEADERS)
            events = stream_events(self.tokens, WANTS_USAGE.search(self.body) is not None)
            asyncio.get_running_loop().call_later(
                self.interval_s, self._drip, events, 0, self.parser.should_keep_alive()
            )
            return
        self.transport.write(GET_RESPONSE if self.parser.get_method() == b"GET" else POST_RESPONSE)
        if not self.parser.should_keep_alive():
            self.transport.close()

    def _drip(self, events: list[bytes], i: int, keep_alive: bool) -> None:
        """One token now, the next one interval later; after the last token, the rest at once."""
        assert self.transport is not None
        if self.transport.is_closing():
            return
        if i < self.tokens - 1:
            self.transport.write(events[i])
            asyncio.get_running_loop().call_later(self.interval_s, self._drip, events, i + 1, keep_alive)
            return
        self.transport.write(b"".join(events[i:]))
        if not keep_alive:
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
    parser.add_argument("--tokens", type=int, default=8, help="tokens in a streamed answer")
    parser.add_argument("--token-interval-ms", type=float, default=20.0, help="time between streamed tokens")
    args = parser.parse_args()
    Upstream.tokens, Upstream.interval_s = args.tokens, args.token_interval_ms / 1000
    uvloop.run(serve(args.host, args.port))


if __name__ == "__main__":
    main()
