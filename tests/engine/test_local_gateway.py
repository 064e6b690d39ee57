"""Local models through the gateway with the openai SDK, on the stand-in server (fast): tools
refused with a 400 that names the model's missing support, or served where its chat template
has a tool format; the model's own context length; a cold start that answers 503 with a
retry-after instead of hanging, or lets a fallback answer while the engine starts."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from tests.engine.test_launcher import STAND_IN
from tests.engine.test_model_facts import HERMES_TEMPLATE, SMOLLM2_TEMPLATE
from tests.support import FakeUpstream, GatewayProcess, _env, model, wait_until

pytestmark = pytest.mark.slow  # boots processes: not in the fast lane

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather in a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
]


def checkpoint(path: Path, template: str, length: int = 1024) -> Path:
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps({"max_position_embeddings": length}))
    (path / "tokenizer_config.json").write_text(json.dumps({"chat_template": template}))
    return path


def local(name: str, path: Path, **engine: object) -> dict:
    return {
        "name": name,
        "provider": "local",
        "model": str(path),
        "timeout_s": 30,
        "engine": {
            "server_module": STAND_IN,
            "gpu_hour_usd": "0.10",
            "health_interval_s": 0.2,
            "idle_shutdown_s": None,
            **engine,
        },
    }


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("local-gw")


@pytest.fixture(scope="module")
def gw(work: Path, fake_upstream: FakeUpstream) -> Iterator[GatewayProcess]:
    smol = checkpoint(work / "smol", SMOLLM2_TEMPLATE)
    hermes = checkpoint(work / "hermes", HERMES_TEMPLATE)
    gated = {"start_wait_s": 1}
    gateway = GatewayProcess(
        {
            "models": [
                local("smol", smol),
                local("hermes", hermes),
                local("cold", smol, **gated, extra_args=["--stand-in-ready-file", str(work / "cold-ready")]),
                local("cold-fb", hermes, **gated, extra_args=["--stand-in-ready-file", str(work / "cold-fb-ready")])
                | {"fallbacks": ["small"]},
                model("small", "echo-small", fake_upstream.url),
            ]
        },
        work / "gw",
    )
    yield gateway
    gateway.stop()


@pytest.fixture(scope="module")
def client(gw: GatewayProcess) -> openai.OpenAI:
    return gw.client(gw.new_key("local-team"), timeout=30)


def engine(gw: GatewayProcess, name: str) -> dict:
    return next(e for e in gw.admin("GET", "/admin/engine").json()["data"] if e["name"] == name)


def wait_engine(gw: GatewayProcess, name: str, state: str) -> dict:
    def reached() -> dict | None:
        status = engine(gw, name)
        return status if status["state"] == state else None

    return wait_until(reached, timeout=60, interval=0.05, what=f"engine {name} {state}")


@pytest.mark.parametrize(
    "messages",
    [
        None,  # tools offered
        [
            {"role": "user", "content": "weather?"},  # no tools offered, but a tool call and its result in the history
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        ],
    ],
)
def test_tools_to_a_model_without_tool_support_get_a_400_that_names_it(
    gw: GatewayProcess, client: openai.OpenAI, messages: list | None, work: Path
) -> None:
    tools = {"tools": TOOLS} if messages is None else {}
    starts = engine(gw, "smol")["starts"]
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(
            model="smol", messages=messages or [{"role": "user", "content": "weather?"}], **tools
        )
    error = refused.value
    assert error.code == "tools_not_supported" and error.param == "tools"
    assert "model 'smol' does not support tools: its chat template (from the model's config.json)" in error.message
    assert str(work) not in error.message  # no path of the server's disk
    assert "enable-auto-tool-choice" not in error.message and "tool-call-parser" not in error.message
    assert engine(gw, "smol")["starts"] == starts  # refused before the engine was asked (or started)
    answer = client.chat.completions.create(model="smol", messages=[{"role": "user", "content": "hi"}])
    assert answer.choices[0].message.content.startswith("pid ")  # without tools the same model answers


def test_a_model_whose_template_has_a_tool_format_gets_the_tools(
    gw: GatewayProcess, client: openai.OpenAI, work: Path
) -> None:
    answer = client.chat.completions.create(
        model="hermes", messages=[{"role": "user", "content": "weather?"}], tools=TOOLS
    )
    assert answer.choices[0].finish_reason == "stop"  # the engine took the tools (the stand-in refuses them
    status = engine(gw, "hermes")  # without vLLM's tool flags, as vLLM does)
    assert status["tool_parser"] == "hermes"
    logs = "".join(p.read_text() for p in (work / "gw" / "data" / "engine").glob("*.log"))  # the data_dir's
    assert "--enable-auto-tool-choice --tool-call-parser hermes" in logs


def test_the_models_own_context_length_is_used(gw: GatewayProcess, client: openai.OpenAI) -> None:
    client.chat.completions.create(model="smol", messages=[{"role": "user", "content": "hi"}])
    assert engine(gw, "smol")["max_model_len"] == 1024  # config.json's, not a forced 4096


def test_a_configured_length_above_the_models_own_stops_the_gateway_with_one_line(work: Path) -> None:
    config = work / "too-long.yaml"
    config.write_text(
        json.dumps({"data_dir": str(work / "too-long"), "models": [local("smol", work / "smol", max_model_len=4096)]})
    )
    result = subprocess.run(
        [sys.executable, "-m", "gateway.cli", "serve", "--config", str(config)],
        env=_env(),
        cwd=work,
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = [line for line in result.stderr.splitlines() if " WARNING " not in line]
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert "model 'smol': engine.max_model_len 4096 is above the model's own context length 1024" in lines[0]


def test_a_cold_engine_answers_503_with_retry_after_instead_of_hanging(gw: GatewayProcess, work: Path) -> None:
    key = gw.new_key("cold-team")
    with pytest.raises(openai.APIStatusError) as refused:  # no retries: see the answer itself
        gw.client(key, timeout=30).chat.completions.create(model="cold", messages=[{"role": "user", "content": "hi"}])
    error = refused.value
    assert error.status_code == 503 and error.code == "engine_starting"
    assert int(error.response.headers["retry-after"]) >= 1 and "is starting" in error.message
    assert engine(gw, "cold")["state"] == "starting"  # the start goes on without the request

    def finish_start() -> None:
        wait_engine(gw, "cold", "starting")
        (work / "cold-ready").touch()

    opener = threading.Thread(target=finish_start)
    opener.start()
    # the SDK's default retries honour retry-after: the client sees an answer, not an error
    patient = openai.OpenAI(base_url=gw.url + "/v1", api_key=key, timeout=30, max_retries=5)
    answer = patient.chat.completions.create(model="cold", messages=[{"role": "user", "content": "hi"}])
    opener.join()
    assert answer.choices[0].message.content.startswith("pid ")


def test_a_fallback_answers_while_the_engine_starts(gw: GatewayProcess, client: openai.OpenAI, work: Path) -> None:
    raw = client.chat.completions.with_raw_response.create(
        model="cold-fb", messages=[{"role": "user", "content": "hi"}]
    )
    assert raw.headers["x-costgate-model"] == "small" and raw.parse().choices[0].message.content == "echo: hi"
    assert engine(gw, "cold-fb")["state"] == "starting"
    (work / "cold-fb-ready").touch()
    wait_engine(gw, "cold-fb", "ready")
    raw = client.chat.completions.with_raw_response.create(
        model="cold-fb", messages=[{"role": "user", "content": "hi again"}]
    )
    assert raw.headers["x-costgate-model"] == "cold-fb"  # (a new question: "hi" is in the exact cache now)
