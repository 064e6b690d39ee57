"""The shipped MiniLM, loaded on first use and shared by what reads sentence vectors: the
semantic cache (its second stage) and the cascades (their scorers read the query's topic,
policies/scorers/topic.py). One model and one worker thread a gateway, however many use it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from policies.semantic_cache.embedder import EmbedWorker


class MiniLM:
    def __init__(self) -> None:
        self._worker: EmbedWorker | None = None

    def load(self) -> None:
        """Load the model now (at start), not on the first request that needs it."""
        self._loaded()

    async def embed_many(self, texts: list[str]) -> np.ndarray:
        """(len(texts), 384) unit rows, computed on the worker thread (never the event loop)."""
        return await self._loaded().embed_many(texts)

    def _loaded(self) -> EmbedWorker:
        if self._worker is None:  # onnxruntime is imported only when a vector is needed
            from policies.semantic_cache.embedder import Embedder, EmbedWorker

            self._worker = EmbedWorker(Embedder())
        return self._worker

    def close(self) -> None:
        if self._worker is not None:
            self._worker.close()
            self._worker = None
