"""The Responses routes played in-process over scripted chat answers, for the official SDK to
talk to through httpx2.MockTransport: what the route layer will do, done with the pure modules
(parse, resolve the chain, translate, answer whole or streamed, store, GET, DELETE)."""

from __future__ import annotations

import json

import httpx2
import openai

from gateway.apis.responses.output import ResponseMeta, new_id, to_response
from gateway.apis.responses.response_chain import StoredResponse, conversation, deleted, resolve_chain, visible
from gateway.apis.responses.responses_request import parse_request
from gateway.apis.responses.responses_stream import ResponsesStream
from gateway.apis.responses.responses_to_chat import to_chat_request
from gateway.core.errors import GatewayError, error_body
from gateway.core.sse import typed_event
from tests.gateway.apis.chat_samples import CREATED, Answer, chunks, completion


class ResponsesServer:
    def __init__(self, *answers: Answer) -> None:
        self.answers = list(answers)
        self.chat_bodies: list[dict] = []  # what went upstream, in order
        self.store: dict[str, StoredResponse] = {}

    def client(self, key: str = "team-a") -> openai.AsyncOpenAI:
        """A client whose API key is its team's name."""
        http = httpx2.AsyncClient(transport=httpx2.MockTransport(self.handle))
        return openai.AsyncOpenAI(api_key=key, base_url="http://costgate.test/v1", http_client=http, max_retries=0)

    async def handle(self, request: httpx2.Request) -> httpx2.Response:
        team = request.headers["authorization"].removeprefix("Bearer ")
        response_id = request.url.path.removeprefix("/v1/responses").strip("/")
        try:
            if request.method == "POST":
                return await self.create(json.loads(request.content), team)
            stored = visible(self.store.get(response_id), team, response_id)
            if request.method == "DELETE":
                del self.store[response_id]
                return httpx2.Response(200, json=deleted(response_id))
            return httpx2.Response(200, json=stored.response)
        except GatewayError as err:
            return httpx2.Response(err.status, content=error_body(err))

    async def create(self, body: dict, team: str) -> httpx2.Response:
        req = parse_request(body)
        history = []
        if req.previous_response_id:
            history = conversation(await resolve_chain(self._get, req.previous_response_id, team))
        self.chat_bodies.append(to_chat_request(req, history))
        answer = self.answers.pop(0)
        meta = ResponseMeta(new_id("resp"), CREATED, req.model)
        if req.stream:
            stream = ResponsesStream(req, meta)
            events = stream.start()
            for chunk in chunks(answer):
                events += stream.feed(chunk)
            events += stream.finish()
            response, raw = (
                stream.response,
                httpx2.Response(
                    200, content=b"".join(map(typed_event, events)), headers={"content-type": "text/event-stream"}
                ),
            )
        else:
            response = to_response(completion(answer), req, meta)
            raw = httpx2.Response(200, json=response)
        assert response is not None
        if req.stores:
            self.store[meta.id] = StoredResponse.of(req, response, team)
        return raw

    async def _get(self, response_id: str) -> StoredResponse | None:
        return self.store.get(response_id)
