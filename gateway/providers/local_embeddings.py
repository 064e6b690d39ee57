"""`provider: local` with a bundled embedding model (`model: minilm-l6`): OpenAI's
`/v1/embeddings` answered in-process by engine/embeddings.py.

OpenAI's shapes: `input` a string or a list of strings (up to 2,048), `encoding_format`
`float` (default) or `base64` (little-endian float32, what the official SDKs ask for and
decode), `dimensions` only as the model's own 384 (MiniLM's vectors cannot be shortened
meaningfully), `usage` with `prompt_tokens` and `total_tokens` counted by the model's own
tokenizer. Token-id input is refused: ids are only meaningful to the tokenizer that made them.
"""

from __future__ import annotations

import base64
from typing import Any

import numpy as np
import orjson

from engine.cost import LivePrice
from engine.embeddings import LocalEmbedder
from gateway.config.models_config import ModelConfig
from gateway.core.context import Endpoint
from gateway.core.errors import InvalidRequest
from gateway.providers.base import Completion, UpstreamCall, UpstreamStream
from policies.pricing import Usage

MAX_INPUTS = 2048  # OpenAI's limit per request


def texts_of(name: str, value: Any) -> list[str]:
    """The request's `input` as a list of texts, or a 400 that says what is wrong with it."""
    texts = [value] if isinstance(value, str) else value
    if not isinstance(texts, list) or not texts:
        raise InvalidRequest("'input' must be a string or a non-empty list of strings", param="input")
    if not all(isinstance(t, str) for t in texts):
        raise InvalidRequest(
            f"model {name!r} takes text input: token ids are only meaningful to the tokenizer that made them",
            param="input",
        )
    if len(texts) > MAX_INPUTS:
        raise InvalidRequest(f"'input' may hold at most {MAX_INPUTS} texts, not {len(texts)}", param="input")
    if any(not t for t in texts):
        raise InvalidRequest("'input' may not contain empty strings", param="input")
    return texts


def encoded(vector: np.ndarray, encoding: str) -> list[float] | str:
    if encoding == "base64":
        return base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii")
    return vector.tolist()


class LocalEmbeddingProvider:
    def __init__(self, config: ModelConfig, embedder: LocalEmbedder) -> None:
        self.name = config.name
        self.config = config
        self.embedder = embedder
        self.price = LivePrice(embedder)

    async def complete(self, call: UpstreamCall) -> Completion:
        if call.endpoint is not Endpoint.EMBEDDINGS:
            raise InvalidRequest(f"model {self.name!r} is an embedding model: use POST /v1/embeddings", param="model")
        body = call.body
        encoding = body.get("encoding_format") or "float"
        if encoding not in ("float", "base64"):
            raise InvalidRequest("'encoding_format' must be 'float' or 'base64'", param="encoding_format")
        dimensions = body.get("dimensions")
        if dimensions is not None and dimensions != self.embedder.dimensions:
            raise InvalidRequest(
                f"model {self.name!r} makes {self.embedder.dimensions}-dimensional vectors and cannot shorten them",
                param="dimensions",
            )
        done = await self.embedder.embed(texts_of(self.name, body.get("input")))
        tokens = sum(done.tokens)
        answer = {
            "object": "list",
            "model": str(body.get("model") or self.name),
            "data": [
                {"object": "embedding", "index": i, "embedding": encoded(v, encoding)}
                for i, v in enumerate(done.vectors)
            ],
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
        return Completion(answer, orjson.dumps(answer), Usage(tokens, 0))

    async def open_stream(self, call: UpstreamCall) -> UpstreamStream:
        raise InvalidRequest(f"model {self.name!r} is an embedding model: embeddings are not streamed", param="stream")

    async def aclose(self) -> None:
        self.embedder.close()
