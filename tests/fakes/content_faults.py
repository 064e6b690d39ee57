"""An OpenAI-compatible upstream whose failures depend on what is asked, as a real provider's can:
a chat request whose messages hold `trigger` gets `status` (500 by default) with an OpenAI
error body; any other gets a short answer with usage. So one team's requests fail while
another's, to the same model, succeed. Runs in a thread of the test's own process.

`calls` counts the requests answered, by outcome ("ok" or "failed").
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.support import free_port

USAGE = {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}


def answer(model: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-content-faults",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "fine"}, "finish_reason": "stop"}],
        "usage": USAGE,
    }


class ContentFaultUpstream:
    def __init__(self, trigger: str = "POISON", status: int = 500) -> None:
        self.trigger, self.status = trigger, status
        self.calls: Counter[str] = Counter()
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), self._handler())
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))))
                poisoned = upstream.trigger in json.dumps(body.get("messages", []))
                upstream.calls["failed" if poisoned else "ok"] += 1
                if poisoned:
                    error = {"message": "The server had an error", "type": "server_error", "code": None}
                    self._send(upstream.status, {"error": error})
                else:
                    self._send(200, answer(str(body.get("model", ""))))

            def _send(self, status: int, data: dict[str, Any]) -> None:
                raw = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args: Any) -> None:
                pass

        return Handler

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
