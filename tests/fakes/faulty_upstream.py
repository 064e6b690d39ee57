"""A fault-injecting OpenAI-compatible upstream: a raw asyncio server, so it can do what a
well-behaved HTTP framework will not (reset a socket mid-response, stall after the headers,
cut a stream). Tests only; the well-behaved fake is tests/fakes/fake_openai.py.

The behaviour is chosen by the request's model name:

    ok                  a normal answer with usage (stream or not)
    status-NNN          that HTTP status with an OpenAI error body (429 gets retry-after: 0)
    status-429-long     429 with retry-after: 3600 (longer than the gateway waits)
    reset-before        reads the request, then resets the connection without answering
    reset-mid           sends the headers and half the body, then resets the connection
    reset-every-other   resets the first call of every two, answers the second
    flaky-NNN           status NNN on the first call of every two, answers the second (a retry wins)
    slow-headers        waits 30 s before answering anything
    drip-body           sends the headers, then one byte of body every 0.1 s for 60 s
    html                200 text/html instead of JSON (a captive proxy's page)
    html-stream         a stream request answered 200 text/html
    stream-reset        a stream: two chunks, then the connection is reset
    stream-stall        a stream: two chunks, then nothing for 60 s
    stream-garbage      a stream: one chunk, then an event that is not JSON
    echo-auth           400 whose error message quotes the request's authorization header
    echo-auth-200       200 whose answer quotes the authorization header (a misbehaving proxy)
    echo-auth-stream    a stream whose chunks quote the authorization header

`GET /_stats` returns how many calls each model got; `POST /_reset` clears them.
Run: `python -m tests.fakes.faulty_upstream --port 9001`.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import struct
import time
from collections import Counter
from typing import Any

import orjson

USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
ANSWER = "the quick brown fox jumps"


def head(status: int, content_type: str, length: int | None, extra: dict[str, str] | None = None) -> bytes:
    lines = [f"HTTP/1.1 {status} X", f"content-type: {content_type}"]
    lines.append(f"content-length: {length}" if length is not None else "transfer-encoding: chunked")
    lines += [f"{k}: {v}" for k, v in (extra or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def completion(model: str, content: str) -> bytes:
    return orjson.dumps(
        {
            "id": "faulty-1",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": USAGE,
        }
    )


def event(model: str, content: str | None, usage: bool = False, finish_reason: str | None = None) -> bytes:
    delta = {} if finish_reason else {"content": content}
    data: dict[str, Any] = {
        "id": "faulty-s",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
        "choices": [] if usage else [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }
    if usage:
        data["usage"] = USAGE
    return b"data: " + orjson.dumps(data) + b"\n\n"


class Request:
    def __init__(self, method: str, path: str, headers: dict[str, str], body: bytes) -> None:
        self.method, self.path, self.headers, self.body = method, path, headers, body


async def read_request(reader: asyncio.StreamReader) -> Request | None:
    try:
        line = await reader.readline()
        if not line:
            return None
        method, path, _ = line.decode("latin-1").split(" ", 2)
        headers = {}
        while (h := await reader.readline()) not in (b"\r\n", b"\n", b""):
            name, _, value = h.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        return Request(method, path, headers, body)
    except (ValueError, asyncio.IncompleteReadError, ConnectionError):
        return None


def reset(writer: asyncio.StreamWriter) -> None:
    """Close with RST instead of FIN: SO_LINGER on, zero timeout."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class FaultyUpstream:
    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while (request := await read_request(reader)) is not None:
                if not await self.answer(request, writer):
                    return
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            if not writer.is_closing():
                writer.close()

    async def answer(self, request: Request, writer: asyncio.StreamWriter) -> bool:
        """Answer one request; False when the connection was closed or reset on purpose."""
        if request.path.startswith("/_stats"):
            return await self.send(writer, 200, orjson.dumps(dict(self.calls)))
        if request.path.startswith("/_reset"):
            self.calls.clear()
            return await self.send(writer, 200, b"{}")
        body = orjson.loads(request.body or b"{}")
        model = str(body.get("model", ""))
        self.calls[model] += 1
        n = self.calls[model]
        auth = request.headers.get("authorization", "")
        if body.get("stream"):
            return await self.stream(writer, model, auth)
        if model.startswith("flaky-") and n % 2 == 1:
            model = "status-" + model.split("-")[1]
        if model.startswith("status-"):
            status = int(model.split("-")[1])
            retry = {"retry-after": "3600" if model.endswith("long") else "0"} if status == 429 else {}
            err = orjson.dumps({"error": {"message": f"faulty {status}", "type": "server_error", "code": None}})
            return await self.send(writer, status, err, extra=retry)
        if model == "reset-before" or (model == "reset-every-other" and n % 2 == 1):
            reset(writer)
            return False
        if model == "reset-mid":
            payload = completion(model, ANSWER)
            writer.write(head(200, "application/json", len(payload)) + payload[: len(payload) // 2])
            await writer.drain()
            await asyncio.sleep(0.05)
            reset(writer)
            return False
        if model == "slow-headers":
            await asyncio.sleep(30)
        if model == "drip-body":
            payload = completion(model, ANSWER) + b" " * 1000
            writer.write(head(200, "application/json", len(payload)))
            for i in range(min(600, len(payload))):
                writer.write(payload[i : i + 1])
                await writer.drain()
                await asyncio.sleep(0.1)
            return False
        if model == "html":
            return await self.send(writer, 200, b"<html><body>Login required</body></html>", "text/html")
        if model == "echo-auth":
            err = orjson.dumps({"error": {"message": f"invalid header: {auth}", "type": "invalid_request_error"}})
            return await self.send(writer, 400, err)
        if model == "echo-auth-200":
            return await self.send(writer, 200, completion(model, f"you sent {auth}"))
        return await self.send(writer, 200, completion(model, ANSWER))

    async def send(
        self,
        writer: asyncio.StreamWriter,
        status: int,
        payload: bytes,
        content_type: str = "application/json",
        extra: dict[str, str] | None = None,
    ) -> bool:
        writer.write(head(status, content_type, len(payload), extra) + payload)
        await writer.drain()
        return True

    async def stream(self, writer: asyncio.StreamWriter, model: str, auth: str) -> bool:
        if model.startswith("status-") or model == "reset-before":
            return await self.answer_plain_failure(writer, model)
        if model == "html-stream":
            return await self.send(writer, 200, b"<html>proxy error</html>", "text/html")
        writer.write(head(200, "text/event-stream", None))
        words = (f"you sent {auth}" if model == "echo-auth-stream" else ANSWER).split()
        for i, word in enumerate(words):
            if i == 2 and model in ("stream-reset", "stream-stall"):
                await writer.drain()
                if model == "stream-stall":
                    await asyncio.sleep(60)
                reset(writer)
                return False
            if i == 1 and model == "stream-garbage":
                writer.write(chunk(b"data: {not json\n\n"))
                continue
            writer.write(chunk(event(model, word + " ")))
            await writer.drain()
        writer.write(
            chunk(event(model, None, finish_reason="stop"))
            + chunk(event(model, None, usage=True))
            + chunk(b"data: [DONE]\n\n")
            + b"0\r\n\r\n"
        )
        await writer.drain()
        return True

    async def answer_plain_failure(self, writer: asyncio.StreamWriter, model: str) -> bool:
        if model == "reset-before":
            reset(writer)
            return False
        status = int(model.split("-")[1])
        retry = {"retry-after": "3600" if model.endswith("long") else "0"} if status == 429 else {}
        return await self.send(writer, status, b'{"error": {"message": "faulty", "type": "server_error"}}', extra=retry)


async def main(port: int) -> None:
    upstream = FaultyUpstream()
    server = await asyncio.start_server(upstream.serve, "127.0.0.1", port)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=9001)
    asyncio.run(main(parser.parse_args().port))
