"""The first run (issue 28, item 6): local engines start when the gateway starts, not at the
first request, and the console says when the gateway serves and what is still starting."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from engine.first_start import first_start_record, record_first_start
from engine.launcher import State
from gateway.config.models_config import ModelConfig
from gateway.config.settings import Settings
from gateway.providers.local import LocalProvider, local_provider
from gateway.service import build_gateway
from tests.engine.test_launcher import STAND_IN, _until


def local_model(tmp_path: Path, name: str, **engine: object) -> ModelConfig:
    path = tmp_path / name
    path.mkdir()
    (path / "config.json").write_text(json.dumps({"max_position_embeddings": 1024}))
    gate = tmp_path / f"{name}-ready"  # never created: the start stays under way
    settings = {"server_module": STAND_IN, "warm_up": False, "idle_shutdown_s": None, **engine}
    settings["extra_args"] = ["--stand-in-ready-file", str(gate)]
    return ModelConfig(name=name, provider="local", model=str(path), engine=settings)


@pytest.mark.slow  # starts the stand-in engine's process
async def test_serve_starts_the_engines_and_says_it_is_ready(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    models = [local_model(tmp_path, "eager", expected_start_s=90), local_model(tmp_path, "lazy", start_at_serve=False)]
    settings = Settings(
        admin_key="k", database_url=f"sqlite:///{tmp_path}/db.sqlite", data_dir=str(tmp_path / "data"), models=models
    )
    gw = build_gateway(settings)
    eager, lazy = (gw.deployments[n].provider for n in ("eager", "lazy"))
    assert isinstance(eager, LocalProvider) and isinstance(lazy, LocalProvider)
    with caplog.at_level(logging.INFO, logger="costgate"):
        await gw.start()
    try:
        await _until(lambda: eager.replica._proc is not None)  # launched before any request
        assert eager.replica.state is State.STARTING
        assert lazy.replica.state is State.STOPPED and lazy.replica._proc is None
        ready = [r.getMessage() for r in caplog.records if r.getMessage().startswith("costgate ready")]
        assert len(ready) == 1 and "eager, lazy" in ready[0]
        assert "the local engine for eager is starting (about 90 s;" in ready[0] and "for lazy" not in ready[0]
    finally:
        await gw.stop()
    assert eager.replica._proc is None  # stopping the gateway ends a start under way


def test_a_first_start_measured_by_an_earlier_process_is_the_next_ones_estimate(tmp_path: Path) -> None:
    config = local_model(tmp_path, "m", expected_start_s=90)
    data = tmp_path / "data"
    before = local_provider(config, str(data))
    assert isinstance(before, LocalProvider) and before.replica.first_start_s == 90  # as configured
    record_first_start(first_start_record(data / "engine", before.replica.spec.served_name), 41.5)
    after = local_provider(config, str(data))  # the next `costgate serve` on this machine
    assert isinstance(after, LocalProvider) and after.replica.first_start_s == 41.5
