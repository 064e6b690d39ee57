"""KV-cache capacity from a model config, and reading vLLM's Prometheus counters. Pure."""

from __future__ import annotations

import pytest

from engine.health import parse_metrics
from engine.kv_cache import GIB, KvShape, bytes_per_token, reported_kv_tokens, tokens_per_gib

SMOLLM2 = {"num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3, "hidden_size": 576}
TINY = {"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "hidden_size": 256, "head_dim": 64}


@pytest.mark.parametrize(
    ("config", "dtype", "expected"),
    [
        (SMOLLM2, "auto", 2 * 30 * 3 * 64 * 2),  # 23,040 bytes per token in bf16
        (SMOLLM2, "fp8", 2 * 30 * 3 * 64),  # half
        (SMOLLM2, "int8_per_token_head", 2 * 30 * 3 * (64 + 4)),  # plus one float32 scale per head vector
        (TINY, "auto", 2 * 2 * 2 * 64 * 2),
        (TINY, "fp8", 512),  # vLLM reports 2,097,152 tokens in 1 GiB for this model
        ({"text_config": TINY}, "fp8", 512),
    ],
)
def test_bytes_per_token(config: dict, dtype: str, expected: int) -> None:
    assert bytes_per_token(KvShape.from_config(config), dtype) == expected


def test_eight_bit_cache_holds_twice_the_tokens() -> None:
    shape = KvShape.from_config(SMOLLM2)
    assert tokens_per_gib(shape, "fp8") == 2 * tokens_per_gib(shape, "auto")
    assert tokens_per_gib(shape, "int8_per_token_head") / tokens_per_gib(shape, "auto") == pytest.approx(
        2 * 64 / 68, rel=1e-3
    )
    assert tokens_per_gib(KvShape.from_config(TINY), "fp8") == GIB // 512 == 2_097_152


def test_unknown_dtype_is_refused() -> None:
    with pytest.raises(ValueError):
        bytes_per_token(KvShape(1, 1, 64), "int3")


def test_reported_kv_tokens() -> None:
    log = (
        "INFO [kv_cache_utils.py:2327] CPU KV cache size: 2,097,152 tokens, Maximum concurrency ...\n"
        "INFO [kv_cache_utils.py:2327] GPU KV cache size: 45,000 tokens\n"
    )
    assert reported_kv_tokens(log) == 45_000
    assert reported_kv_tokens("nothing here") is None


SCRAPE = """# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="tiny"} 120.0
vllm:prompt_tokens_total{engine="1",model_name="tiny"} 30.0
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="tiny"} 512.0
# TYPE vllm:request_prefill_time_seconds histogram
vllm:request_prefill_time_seconds_bucket{engine="0",le="0.3",model_name="tiny"} 3.0
vllm:request_prefill_time_seconds_sum{engine="0",model_name="tiny"} 0.75
vllm:request_prefill_time_seconds_count{engine="0",model_name="tiny"} 3.0
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="tiny"} 4.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="tiny"} 2.0
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="tiny"} 200.0
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="tiny"} 50.0
"""


def test_parse_metrics_sums_engines_and_reads_speculation() -> None:
    stats = parse_metrics(SCRAPE, at=10.0)
    c = stats.counters
    assert (c.prompt_tokens, c.generation_tokens, c.prefill_seconds, c.running) == (150.0, 512.0, 0.75, 4.0)
    assert stats.waiting == 2.0 and stats.speculating and stats.acceptance == 0.25


def test_parse_metrics_without_speculation() -> None:
    stats = parse_metrics(SCRAPE.split("# TYPE vllm:spec_decode")[0], at=0.0)
    assert not stats.speculating and stats.acceptance is None
