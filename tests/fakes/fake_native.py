"""The fake upstream's native Responses and Messages endpoints (`POST /v1/responses`,
`POST /v1/messages`), whole and streamed, for the passthrough tests.

Each parses its request as OpenAI or Anthropic would (costgate's own parsers, which refuse what
those APIs refuse), answers as the fake's chat endpoint would (an echo, or the tool call asked
for: tests/fakes/fake_tools.py), and writes the answer with costgate's translators, whose
output the SDK tests check against the official types. A test tells the native path from the
translated one by `/_stats` (`responses:<model>`, `messages:<model>`) and by the ids
(`resp_native…`, `msg_native…`)."""

from __future__ import annotations

import secrets
import time
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from gateway.apis.anthropic.anthropic_errors import anthropic_error
from gateway.apis.anthropic.headers import api_version
from gateway.apis.anthropic.message import MessageMeta, to_message
from gateway.apis.anthropic.messages_request import parse_request as parse_messages
from gateway.apis.anthropic.messages_stream import MessagesStream
from gateway.apis.anthropic.messages_to_chat import to_chat_request as messages_to_chat
from gateway.apis.responses.output import ResponseMeta, to_response
from gateway.apis.responses.responses_request import parse_request as parse_responses
from gateway.apis.responses.responses_stream import ResponsesStream
from gateway.apis.responses.responses_to_chat import to_chat_request as responses_to_chat
from gateway.core.errors import GatewayError, error_body
from gateway.core.sse import typed_event
from tests.fakes.fake_tools import tool_chunks, tool_completion, tool_message, wanted_tool


def chat_completion(
    chat: dict[str, Any], model: str, last_user_text: Any, words: Any, prompt_text: Any
) -> dict[str, Any]:
    """What the fake's chat endpoint answers `chat` (its helpers passed in: fake_openai imports this)."""
    question = last_user_text(chat)
    answer = "echo: " + question
    if chat.get("max_completion_tokens"):
        answer = " ".join(answer.split()[: chat["max_completion_tokens"]])
    usage = {"prompt_tokens": words(prompt_text(chat)), "completion_tokens": words(answer)}
    usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    tool = wanted_tool(chat)
    if tool is not None:
        return tool_completion(model, tool_message(tool, question), usage)
    return {
        "id": "fake-native",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}],
        "usage": usage,
    }


def chat_chunks(completion: dict[str, Any]) -> list[dict[str, Any]]:
    choice, model, usage = completion["choices"][0], completion["model"], completion["usage"]
    if choice["message"].get("tool_calls"):
        return tool_chunks(model, choice["message"], usage)
    base = {"id": "fake-native", "object": "chat.completion.chunk", "created": completion["created"], "model": model}
    words = choice["message"]["content"].split(" ")
    out = [
        {**base, "choices": [{"index": 0, "delta": {"content": w if i == 0 else " " + w}, "finish_reason": None}]}
        for i, w in enumerate(words)
    ]
    out.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]})
    return out + [{**base, "choices": [], "usage": usage}]


async def _events(events: list[dict[str, Any]]) -> AsyncIterator[bytes]:
    for event in events:
        yield typed_event(event)


class NativeEndpoints:
    def __init__(self, calls: Counter[str], answer: Any) -> None:
        self.calls = calls
        self.answer = answer  # chat body, model -> the fake's chat completion

    async def responses(self, request: Request) -> Response:
        body = orjson.loads(await request.body())
        self.calls[f"responses:{body.get('model')}"] += 1
        try:
            req = parse_responses(body)
            completion = self.answer(responses_to_chat(req), body["model"])
        except GatewayError as err:
            return Response(error_body(err), status_code=err.status, media_type="application/json")
        meta = ResponseMeta("resp_native" + secrets.token_hex(20), int(time.time()), body["model"])
        if not req.stream or body["model"] == "json-stream":
            return Response(orjson.dumps(to_response(completion, req, meta)), media_type="application/json")
        stream = ResponsesStream(req, meta)
        events = stream.start() + [e for c in chat_chunks(completion) for e in stream.feed(c)] + stream.finish()
        return StreamingResponse(_events(events), media_type="text/event-stream")

    async def messages(self, request: Request) -> Response:
        body = orjson.loads(await request.body())
        self.calls[f"messages:{body.get('model')}"] += 1
        try:
            req = parse_messages(body, api_version(request.headers))
            completion = self.answer(messages_to_chat(req), body["model"])
        except GatewayError as err:
            return Response(orjson.dumps(anthropic_error(err)), status_code=err.status, media_type="application/json")
        meta = MessageMeta("msg_native" + secrets.token_hex(12), body["model"], tuple(req.stop_sequences or ()))
        if not req.stream or body["model"] == "json-stream":
            return Response(orjson.dumps(to_message(completion, meta)), media_type="application/json")
        stream = MessagesStream(meta, input_tokens=completion["usage"]["prompt_tokens"])
        events = stream.start() + [e for c in chat_chunks(completion) for e in stream.feed(c)] + stream.finish()
        return StreamingResponse(_events(events), media_type="text/event-stream")
