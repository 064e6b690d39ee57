"""The first stage: static token vectors distilled from the shipped MiniLM, ~30 µs a question.

A question's static vector is the L2-normalised sum of its word pieces' rows in a table
(`model/static-minilm.npz`, built offline by `distill_static` from the shipped int8 MiniLM:
each vocabulary token through the model once, PCA to `table.shape[1]` dimensions, frequent
tokens weighted down, then fitted so that static cosines track MiniLM's). No matrix multiply
runs per question, so a vector never depends on what else was embedded with it, and a miss
costs a tokenizer call and a small sum instead of a ~1.5 ms transformer pass.

The file also carries the gates the table was measured with, and how many candidates to take
(`candidates`). The static cosine a stored question must reach to be worth a MiniLM pass
depends on the MiniLM cosine the verifier needs to serve it: a candidate that needs 0.95 (the
default bound's least) can be passed over at static cosines where one that needs 0.85 cannot.
`gate_for(needed)` is a line under the static cosines of held-out pairs of questions at each
MiniLM cosine, and `clears` adds a second one under the static cosine plus the share of words
the two questions have in common (`distill_static.fit_gate_lines` fits both); `gate` is the flat
one for a search with no verifier, at MiniLM 0.85. `bench/semantic_cache_speed.py --recall-only`
re-measures them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from policies.semantic_cache.embedder import MAX_TOKENS, MODEL_DIR

STATIC_FILE = MODEL_DIR / "static-minilm.npz"
GATE_AT = 0.85  # the MiniLM cosine at which `gate_line` starts: the verifier never serves below it


@dataclass(frozen=True)
class StaticEmbedder:
    table: np.ndarray  # (vocabulary, dim) float32
    gate: float  # static cosine below which a candidate is not worth a MiniLM pass (no verifier)
    candidates: int  # stored questions re-ranked by their MiniLM vectors, at most
    tokenizer: Tokenizer
    gate_line: tuple[float, float] | None = None  # (static gate at MiniLM GATE_AT, slope); None: `gate`
    overlap_line: tuple[float, float] | None = None  # (weight of the word overlap, base at GATE_AT); see `clears`

    @classmethod
    def load(cls, path: Path = STATIC_FILE) -> StaticEmbedder:
        with np.load(path) as data:
            line = (float(data["gate_base"]), float(data["gate_slope"])) if "gate_base" in data.files else None
            overlap = (
                (float(data["overlap_weight"]), float(data["overlap_base"])) if "overlap_base" in data.files else None
            )
            return cls.of(data["table"], float(data["gate"]), int(data["candidates"]), line, overlap)

    @classmethod
    def of(
        cls,
        table: np.ndarray,
        gate: float,
        candidates: int,
        gate_line: tuple[float, float] | None = None,
        overlap_line: tuple[float, float] | None = None,
    ) -> StaticEmbedder:
        tokenizer = Tokenizer.from_file(str(MODEL_DIR / "tokenizer.json"))
        tokenizer.no_padding()
        tokenizer.enable_truncation(MAX_TOKENS)
        return cls(np.asarray(table, dtype=np.float32), gate, candidates, tokenizer, gate_line, overlap_line)

    def gate_for(self, needed: float) -> float:
        """The static cosine under which a stored question almost never has MiniLM cosine
        `needed` with the query (so it is not worth a pass when the verifier needs that much):
        the gate line, never under the flat gate (at the loose end, where the line runs under
        it, the flat gate was measured to keep 99.5% of the nearest questions)."""
        if self.gate_line is None:
            return self.gate
        base, slope = self.gate_line
        return max(self.gate, base + slope * (needed - GATE_AT))

    def clears(self, needed: float, static_cosine: float, overlap: Callable[[], float]) -> bool:
        """Is a stored question at `static_cosine` worth a MiniLM pass when the verifier needs
        MiniLM cosine `needed` to serve it? It must clear the gate line, and, where the file has
        one, the overlap line: its static cosine plus `weight` x the share of words it has in
        common with the query (`overlap()`, asked only past the first line) must reach
        `base + slope (needed - GATE_AT)`, the same slope. The static sum blurs which words a
        question has; the overlap keeps a question that shares half its words with the query
        (a paraphrase of another question, or of half of it) from costing a pass at the static
        cosine of a rewording (`distill_static.fit_gate_lines`)."""
        if static_cosine < self.gate_for(needed):
            return False
        if self.overlap_line is None or self.gate_line is None:
            return True
        weight, base = self.overlap_line
        return static_cosine + weight * overlap() >= base + self.gate_line[1] * (needed - GATE_AT)

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
