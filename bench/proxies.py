"""The proxies bench/overhead.py compares, each started pinned to a core behind the same fake
upstream: costgate (a key made through its admin API, the caches off so that every request is
an upstream call), LiteLLM's proxy (from its own venv, a master key, no database) and the floor
(bench/floor_proxy.py: costgate's HTTP stack relaying with nothing else, no key)."""

from __future__ import annotations

import sys
from pathlib import Path

import httpx
import yaml

from bench.harness import ADMIN_KEY, MODEL, Processes, base_env, bench_model, free_port, wait_http

LITELLM_MASTER_KEY = "sk-bench-master-0123456789"


def start_costgate(
    procs: Processes, cpu: int, upstream: str, ledger_flush_s: float | None = None
) -> tuple[str, str, int]:
    """costgate with the bench model (`ledger_flush_s`: the ledger writer's interval, its default
    when None); returns (its chat URL, a key made through the admin API, its pid)."""
    workdir = procs.workdir / "costgate"
    workdir.mkdir()
    config = {
        "admin_key": ADMIN_KEY,
        "database_url": f"sqlite:///{workdir}/costgate.db",
        "data_dir": str(workdir),
        "models": [bench_model(upstream)],
        "cache": {"exact": {"enabled": False}, "semantic": {"enabled": False}},
    }
    if ledger_flush_s is not None:
        config["ledger_flush_interval_s"] = ledger_flush_s
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    port = free_port()
    proc = procs.start(
        "costgate",
        cpu,
        [
            sys.executable,
            "-m",
            "gateway.cli",
            "serve",
            "--config",
            str(workdir / "config.yaml"),
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        base_env(),
        workdir,
    )
    url = f"http://127.0.0.1:{port}"
    wait_http(url + "/healthz", proc, 120)
    admin = {"authorization": f"Bearer {ADMIN_KEY}"}
    httpx.post(url + "/admin/teams", json={"name": "bench"}, headers=admin).raise_for_status()
    response = httpx.post(url + "/admin/keys", json={"team": "bench"}, headers=admin)
    response.raise_for_status()
    return url + "/v1/chat/completions", response.json()["key"], proc.pid


def start_litellm(procs: Processes, cpu: int, upstream: str, venv: Path) -> tuple[str, int]:
    workdir = procs.workdir / "litellm"
    workdir.mkdir()
    config = {
        "model_list": [
            {
                "model_name": MODEL,
                "litellm_params": {"model": f"openai/{MODEL}", "api_base": upstream, "api_key": "fake"},
            }
        ],
        "general_settings": {"master_key": LITELLM_MASTER_KEY},
    }
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    port = free_port()
    env = base_env()
    env.pop("PYTHONPATH")
    env.update({"LITELLM_LOG": "ERROR", "DISABLE_SCHEMA_UPDATE": "True"})
    env.pop("DATABASE_URL", None)
    proc = procs.start(
        "litellm",
        cpu,
        [
            str(venv / "bin" / "litellm"),
            "--config",
            str(workdir / "config.yaml"),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--num_workers",
            "1",
        ],
        env,
        workdir,
    )
    url = f"http://127.0.0.1:{port}"
    wait_http(url + "/health/liveliness", proc, 300)
    return url + "/v1/chat/completions", proc.pid


def start_floor(procs: Processes, cpu: int, upstream: str) -> tuple[str, int]:
    """bench/floor_proxy.py; returns (its chat URL, its pid)."""
    port = free_port()
    proc = procs.start(
        "floor",
        cpu,
        [sys.executable, str(Path(__file__).with_name("floor_proxy.py")), "--port", str(port), "--upstream", upstream],
        base_env(),
        procs.workdir,
    )
    url = f"http://127.0.0.1:{port}"
    wait_http(url + "/healthz", proc, 60)
    return url + "/v1/chat/completions", proc.pid
