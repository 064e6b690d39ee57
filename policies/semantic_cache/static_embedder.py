"""The first stage: static token vectors distilled from the shipped MiniLM, ~30 µs a question.

A question's static vector is the L2-normalised sum of its word pieces' rows in a table
(`model/static-minilm.npz`, built offline by `distill_static` from the shipped int8 MiniLM:
each vocabulary token through the model once, PCA to `table.shape[1]` dimensions, frequent
tokens weighted down, then fitted so that static cosines track MiniLM's). No matrix multiply
runs per question, so a vector never depends on what else was embedded with it, and a miss
costs a tokenizer call and a small sum instead of a ~1.5 ms transformer pass.

The file also carries the gate the table was measured with: the static cosine a stored
question must reach to be worth a MiniLM pass (`gate`), and how many candidates to take
(`candidates`). `bench/semantic_cache_speed.py --recall` re-measures both.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from policies.semantic_cache.embedder import MAX_TOKENS, MODEL_DIR

STATIC_FILE = MODEL_DIR / "static-minilm.npz"


@dataclass(frozen=True)
class StaticEmbedder:
    table: np.ndarray  # (vocabulary, dim) float32
    gate: float  # static cosine below which a candidate is not worth a MiniLM pass
    candidates: int  # stored questions re-ranked by their MiniLM vectors, at most
    tokenizer: Tokenizer

    @classmethod
    def load(cls, path: Path = STATIC_FILE) -> StaticEmbedder:
        with np.load(path) as data:
            return cls.of(data["table"], float(data["gate"]), int(data["candidates"]))

    @classmethod
    def of(cls, table: np.ndarray, gate: float, candidates: int) -> StaticEmbedder:
        tokenizer = Tokenizer.from_file(str(MODEL_DIR / "tokenizer.json"))
        tokenizer.no_padding()
        tokenizer.enable_truncation(MAX_TOKENS)
        return cls(np.asarray(table, dtype=np.float32), gate, candidates, tokenizer)

    def token_ids(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    @property
    def dim(self) -> int:
        return int(self.table.shape[1])

    def embed(self, text: str) -> np.ndarray:
        """(dim,) float32, unit (all zeros for a text with no word pieces)."""
        ids = self.token_ids(text)
        vector = self.table[ids].sum(axis=0) if ids else np.zeros(self.dim, dtype=np.float32)
        norm = float(np.linalg.norm(vector))
        return vector / norm if norm > 0 else vector

    def embed_many(self, texts: list[str]) -> np.ndarray:
        return np.stack([self.embed(t) for t in texts]) if texts else np.zeros((0, self.dim), np.float32)
