"""Start-up: embedded defaults, and nothing slow or networked on the import path."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support import ROOT

pytestmark = pytest.mark.slow  # boots processes: not in the fast lane


def test_building_the_app_imports_nothing_its_config_does_not_use() -> None:
    """litellm (no litellm model), redis (no Redis backend), FAISS and onnxruntime (no question
    vectors, no embedding yet): each is imported only when used, not on every start."""
    code = (
        "import sys; from gateway.app import create_app; from gateway.config.settings import Settings; "
        "create_app(Settings(admin_key='k', database_url='sqlite:///:memory:')); "
        "print(*[m for m in ('litellm', 'redis', 'faiss', 'onnxruntime') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""


def test_serve_runs_on_embedded_defaults(tmp_path) -> None:
    """No config, no keys: the gateway starts, generates an admin key and answers health checks."""
    import httpx

    from tests.support import free_port, wait_http

    port = free_port()
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "gateway.cli", "serve", "--port", str(port)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/healthz", proc, timeout=120)
        admin_key = (tmp_path / "costgate-data" / "admin_key").read_text().strip()
        teams = httpx.get(f"http://127.0.0.1:{port}/admin/teams", headers={"authorization": f"Bearer {admin_key}"})
        assert teams.status_code == 200
        assert (tmp_path / "costgate-data" / "costgate.db").exists()
    finally:
        proc.terminate()
        proc.wait(30)
