"""Sentence embeddings: all-MiniLM-L6-v2 as an int8 ONNX graph on ONNX Runtime, one thread.

The graph (built by `export_model`) takes token ids and returns the mean-pooled, L2-normalised
384-d vector, so a cosine is a dot product. One short query takes ~1.5-2 ms on one core, too
much to pay on every miss: the cache runs it only for questions whose static vector
(`static_embedder`) comes close to a stored one, on `EmbedWorker`'s thread.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

MODEL_DIR = Path(__file__).with_name("model")
DIM = 384
MAX_TOKENS = 128  # queries past this are cut: the head of a question carries its meaning


class Embedder:
    def __init__(self, model_dir: Path = MODEL_DIR, threads: int = 1, max_tokens: int = MAX_TOKENS) -> None:
        import onnxruntime as ort  # here, not at the top: a gateway that embeds nothing starts without it

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(
            str(model_dir / "minilm-l6-int8.onnx"), options, providers=["CPUExecutionProvider"]
        )
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


class EmbedWorker:
    """Runs MiniLM passes on one worker thread, never on the event loop (onnxruntime releases
    the GIL, so requests keep being served while a pass runs). Texts asked for while a pass
    runs go together in the next one: no waiting window, so an idle gateway pays no delay.
    Each text still runs through the graph alone (see `Embedder.embed_many`): gathering them
    saves thread hops, never changes a vector."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="minilm")
        self._pending: list[tuple[list[str], asyncio.Future[np.ndarray]]] = []
        self._busy = False

    async def embed_many(self, texts: list[str]) -> np.ndarray:
        future: asyncio.Future[np.ndarray] = asyncio.get_running_loop().create_future()
        self._pending.append((texts, future))
        if not self._busy:
            self._next_pass()
        return await future

    def _next_pass(self) -> None:
        batch, self._pending = self._pending, []
        self._busy = True
        texts = [text for group, _ in batch for text in group]
        running = asyncio.get_running_loop().run_in_executor(self._pool, self.embedder.embed_many, texts)
        running.add_done_callback(lambda done: self._hand_out(batch, done))

    def _hand_out(
        self, batch: list[tuple[list[str], asyncio.Future[np.ndarray]]], done: asyncio.Future[np.ndarray]
    ) -> None:
        self._busy = False
        error = done.exception()
        row = 0
        for group, future in batch:
            if future.done():  # its request was cancelled meanwhile
                row += len(group)
                continue
            if error is not None:  # every waiter gets the failure; none may hang
                future.set_exception(error)
            else:
                future.set_result(done.result()[row : row + len(group)])
            row += len(group)
        if self._pending:
            self._next_pass()

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
