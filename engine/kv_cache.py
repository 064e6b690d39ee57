"""KV-cache capacity: how many tokens of context fit in a GiB, per `kv_cache_dtype`. Pure.

Computed from the model's config.json: every token stores one key and one value vector per
layer and KV head, `head_dim` elements each, plus — for the per-token-head formats — one
float32 scale per vector (vLLM's `int8_per_token_head` / `fp8_per_token_head` quantize each
token's head dynamically, so no calibration is needed). The figure vLLM itself reports at start
(its log line `KV cache size: N tokens`) is parsed by `reported_kv_tokens`; the two agree for
the dense formats (tests/engine/test_engine_e2e.py checks it against a live engine).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

GIB = 1024**3
ELEMENT_BYTES = {
    "auto": 2,
    "bfloat16": 2,
    "float16": 2,
    "float32": 4,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "int8_per_token_head": 1,
    "fp8_per_token_head": 1,
}
SCALE_BYTES = {"int8_per_token_head": 4, "fp8_per_token_head": 4}
_REPORTED = re.compile(r"KV cache size: ([\d,]+) tokens")


@dataclass(frozen=True, slots=True)
class KvShape:
    layers: int
    kv_heads: int
    head_dim: int

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> KvShape:
        config = config.get("text_config", config)
        heads = config["num_attention_heads"]
        head_dim = config.get("head_dim") or config["hidden_size"] // heads
        return cls(config["num_hidden_layers"], config.get("num_key_value_heads") or heads, head_dim)


def bytes_per_token(shape: KvShape, kv_cache_dtype: str, model_dtype_bytes: int = 2) -> int:
    if kv_cache_dtype not in ELEMENT_BYTES:
        raise ValueError(f"unknown kv_cache_dtype {kv_cache_dtype!r}")
    element = model_dtype_bytes if kv_cache_dtype == "auto" else ELEMENT_BYTES[kv_cache_dtype]
    per_vector = shape.head_dim * element + SCALE_BYTES.get(kv_cache_dtype, 0)
    return 2 * shape.layers * shape.kv_heads * per_vector  # 2: a key and a value


def tokens_per_gib(shape: KvShape, kv_cache_dtype: str, model_dtype_bytes: int = 2) -> int:
    return GIB // bytes_per_token(shape, kv_cache_dtype, model_dtype_bytes)


def reported_kv_tokens(log_text: str) -> int | None:
    """The last `KV cache size: N tokens` vLLM logged at start, if any."""
    found = _REPORTED.findall(log_text)
    return int(found[-1].replace(",", "")) if found else None
