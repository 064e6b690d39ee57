"""Sentence embeddings: all-MiniLM-L6-v2 as an int8 ONNX graph on ONNX Runtime, one thread.

The graph (built by `export_model`) takes token ids and returns the mean-pooled, L2-normalised
384-d vector, so a cosine is a dot product. One short query takes ~1-2 ms on one core.
`MicroBatcher` gathers the queries of concurrent requests that arrive within a short window
and embeds them in one worker-thread call, so the event loop keeps serving under load.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

MODEL_DIR = Path(__file__).with_name("model")
DIM = 384
MAX_TOKENS = 128  # queries past this are cut: the head of a question carries its meaning


class Embedder:
    def __init__(self, model_dir: Path = MODEL_DIR, threads: int = 1, max_tokens: int = MAX_TOKENS) -> None:
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(str(model_dir / "minilm-l6-int8.onnx"), options,
                                            providers=["CPUExecutionProvider"])
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tokenizer.no_padding()  # the shipped tokenizer pads to 128: 10x the work for a short query
        self.tokenizer.enable_truncation(max_tokens)  # the /v1/embeddings model takes 256 (engine/embeddings.py)

    def embed(self, text: str) -> np.ndarray:
        return self.embed_many([text])[0]

    def embed_many(self, texts: list[str]) -> np.ndarray:
        """(len(texts), 384) float32, unit rows.

        Each text runs through the graph on its own: dynamic int8 quantization scales
        activations per tensor, so in a padded batch a question's vector would depend on its
        neighbours (cosine ~0.985 to its single-run vector) — and a cache must embed the same
        question the same way whether it arrived alone or under load."""
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        for row, text in enumerate(texts):
            ids = np.array([self.tokenizer.encode(text).ids], dtype=np.int64)
            (vector,) = self.session.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids)})
            out[row] = vector[0]
        return out


@dataclass
class MicroBatcher:
    """Coalesces concurrent `embed` calls: the first caller waits `window_s` for company, then
    one `embed_many` runs (in a worker thread, so the event loop keeps serving) for all."""

    embedder: Embedder
    window_s: float = 0.002
    max_batch: int = 32
    _pending: list[tuple[str, asyncio.Future[np.ndarray]]] = field(default_factory=list)
    _flusher: asyncio.Task[None] | None = None
    _running: set[asyncio.Task[None]] = field(default_factory=set)  # referenced until done

    async def embed(self, text: str) -> np.ndarray:
        future: asyncio.Future[np.ndarray] = asyncio.get_running_loop().create_future()
        self._pending.append((text, future))
        if len(self._pending) >= self.max_batch:
            self._flush_now()
        elif self._flusher is None:
            self._flusher = asyncio.create_task(self._flush_later())
        return await future

    async def _flush_later(self) -> None:
        await asyncio.sleep(self.window_s)
        self._flusher = None
        await self._run(self._take())

    def _flush_now(self) -> None:
        if self._flusher is not None:
            self._flusher.cancel()
            self._flusher = None
        task = asyncio.create_task(self._run(self._take()))
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    def _take(self) -> list[tuple[str, asyncio.Future[np.ndarray]]]:
        batch, self._pending = self._pending, []
        return batch

    async def _run(self, batch: list[tuple[str, asyncio.Future[np.ndarray]]]) -> None:
        if not batch:
            return
        try:
            if len(batch) == 1:  # the common, idle case: no thread hop
                vectors = self.embedder.embed_many([batch[0][0]])
            else:
                vectors = await asyncio.to_thread(self.embedder.embed_many, [t for t, _ in batch])
        except Exception as err:  # hand the failure to every waiter; none may hang
            for _, future in batch:
                if not future.done():
                    future.set_exception(err)
            return
        for (_, future), vector in zip(batch, vectors):
            if not future.done():
                future.set_result(vector)
