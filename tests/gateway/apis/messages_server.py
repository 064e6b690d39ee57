"""The Messages routes played in-process over scripted chat answers, for the official anthropic
SDK to talk to through httpx2.MockTransport: what the route layer will do, done with the pure
modules (headers, parse, translate, answer whole or streamed, count tokens, errors)."""

from __future__ import annotations

import json

import anthropic
import httpx2

from gateway.apis.anthropic.anthropic_errors import anthropic_error
from gateway.apis.anthropic.headers import api_key, api_version
from gateway.apis.anthropic.message import MessageMeta, new_message_id, to_message
from gateway.apis.anthropic.messages_request import MessagesRequest, parse_count_tokens, parse_request
from gateway.apis.anthropic.messages_stream import MessagesStream
from gateway.apis.anthropic.messages_to_chat import conversation_body, to_chat_request
from gateway.core.errors import AuthenticationFailed, GatewayError
from gateway.core.sse import typed_event
from gateway.core.tokens import count_messages
from tests.gateway.apis.chat_samples import Answer, chunks, completion


class MessagesServer:
    def __init__(self, *answers: Answer) -> None:
        self.answers = list(answers)
        self.chat_bodies: list[dict] = []  # what went upstream, in order
        self.keys: list[str | None] = []

    def client(self, **options: object) -> anthropic.AsyncAnthropic:
        http = httpx2.AsyncClient(transport=httpx2.MockTransport(self.handle))
        return anthropic.AsyncAnthropic(
            base_url="http://costgate.test", http_client=http, max_retries=0, **({"api_key": "sk-cg-test"} | options)
        )

    async def handle(self, request: httpx2.Request) -> httpx2.Response:
        try:
            key = api_key(request.headers)
            self.keys.append(key)
            if key is None:
                raise AuthenticationFailed("no API key: send it as x-api-key or a bearer token")
            version = api_version(request.headers)
            body = json.loads(request.content)
            if request.url.path == "/v1/messages/count_tokens":
                chat = conversation_body(parse_count_tokens(body, version))
                return httpx2.Response(200, json={"input_tokens": count_messages(chat["messages"], chat["model"])})
            return self.create(parse_request(body, version))
        except GatewayError as err:
            return httpx2.Response(err.status, json=anthropic_error(err, "req_test"))

    def create(self, req: MessagesRequest) -> httpx2.Response:
        chat = to_chat_request(req)
        self.chat_bodies.append(chat)
        answer = self.answers.pop(0)
        meta = MessageMeta(new_message_id(), req.model, tuple(req.stop_sequences or ()))
        if not req.stream:
            return httpx2.Response(200, json=to_message(completion(answer), meta))
        stream = MessagesStream(meta, input_tokens=count_messages(chat["messages"], req.model))
        events = stream.start()
        for chunk in chunks(answer):
            events += stream.feed(chunk)
        events += stream.finish()
        return httpx2.Response(
            200, content=b"".join(map(typed_event, events)), headers={"content-type": "text/event-stream"}
        )
