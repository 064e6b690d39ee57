"""`costgate serve` with a config it cannot use: one line on stderr and exit code 2, no traceback;
and the sample config the guide tells newcomers to copy is valid."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.cli import CONFIG_ERROR_EXIT, SAMPLE_CONFIG, main
from gateway.config.settings import load_settings
from tests.support import ROOT, _env

pytestmark = pytest.mark.slow  # boots processes: not in the fast lane


def _serve(config: Path, cwd: Path, port: int = 0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gateway.cli", "serve", "--config", str(config), "--port", str(port)],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


CANNOT_USE = [
    (None, "no such file (copy costgate.example.yaml"),
    ("models: [1, 2\nadmin_key: x\n", "not valid YAML at line 3"),
    (
        "models:\n  - {name: m, provider: nope}\n",
        "models[0].provider: Input should be 'openai', 'litellm' or 'local'",
    ),
    ("cache: {exact: {enabled: true, colour: red}}\n", "cache.exact.colour: Extra inputs are not permitted"),
    ("- just\n- a list\n", "top level: Input should be a valid dictionary"),
    # caught when the app is built, not by the schema
    (
        "models:\n  - {name: m, api_base: 'http://127.0.0.1:9/v1', fallbacks: [ghost],\n"
        "     price: {input_per_mtok: 1, output_per_mtok: 1}}\n",
        "model 'm': unknown fallbacks ['ghost']",
    ),
]


def _config(tmp_path: Path, text: str | None) -> Path:
    config = tmp_path / "costgate.yaml"
    if text is not None:
        # the data dir in the test's folder (building the app writes the admin key there)
        config.write_text(text if text.startswith("-") else f"data_dir: {tmp_path / 'data'}\n" + text)
    return config


def _one_line(config: Path, stderr: str, says: str) -> None:
    lines = [line for line in stderr.splitlines() if " WARNING " not in line]
    assert len(lines) == 1 and lines[0].startswith(f"costgate: config {config}: "), stderr
    assert says in lines[0] and "Traceback" not in stderr


@pytest.mark.parametrize(("text", "says"), [CANNOT_USE[0], CANNOT_USE[-1]])
def test_a_config_it_cannot_use_is_one_line_and_exit_2(tmp_path: Path, text: str | None, says: str) -> None:
    """As a person runs it: the process's exit code and stderr (a missing file, and what only
    building the app finds)."""
    config = _config(tmp_path, text)
    result = _serve(config, tmp_path)
    assert result.returncode == CONFIG_ERROR_EXIT, result.stderr
    _one_line(config, result.stderr, says)


@pytest.mark.parametrize(("text", "says"), CANNOT_USE)
def test_every_config_error_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str | None, says: str
) -> None:
    """The same command in this process (a new process costs seconds a case)."""
    config = _config(tmp_path, text)
    assert main(["serve", "--config", str(config), "--port", "0"]) == CONFIG_ERROR_EXIT
    _one_line(config, capsys.readouterr().err, says)


def test_a_taken_port_is_one_line_and_exit_2_before_anything_is_written(tmp_path: Path) -> None:
    config = tmp_path / "costgate.yaml"
    config.write_text(f"data_dir: {tmp_path / 'data'}\ndatabase_url: sqlite:///{tmp_path / 'data' / 'c.db'}\n")
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        result = _serve(config, tmp_path, port)
    assert result.returncode == CONFIG_ERROR_EXIT, result.stderr
    lines = [line for line in result.stderr.splitlines() if " WARNING " not in line]
    assert lines == [f"costgate: cannot listen on 127.0.0.1:{port}: Address already in use"], result.stderr
    assert not (tmp_path / "data").exists()  # no admin key, no database


def test_the_sample_config_is_valid() -> None:
    settings = load_settings(ROOT / SAMPLE_CONFIG, {"COSTGATE_ADMIN_KEY": "sk-cg-admin-sample"})
    assert settings.admin_key == "sk-cg-admin-sample"
    (chat,) = [m for m in settings.models if m.name == "smollm2-135m-instruct"]
    assert chat.provider == "local" and chat.api_base is None and chat.engine["gpu_hour_usd"] > 0
    assert settings.cache.exact.enabled


def test_the_guide_starts_from_the_sample_config() -> None:
    guide = (ROOT / "docs" / "guide.md").read_text()
    assert f"cp {SAMPLE_CONFIG} costgate.yaml" in guide and "serve --config costgate.yaml" in guide
