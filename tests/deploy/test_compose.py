"""docker-compose.yml and the Dockerfile, parsed (no Docker engine here) and held consistent
with the helm chart: same images, command, port, probes, variable names and user."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
import yaml

from gateway.config.settings import load_settings

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "costgate"
ENV = {"COSTGATE_ADMIN_KEY": "sk-cg-admin-compose-0123456789", "POSTGRES_PASSWORD": "pw", "OPENAI_API_KEY": "sk-x"}


def interpolate(value: Any, env: dict[str, str]) -> Any:
    """Compose's ${VAR}, ${VAR:-default} and ${VAR:?error} substitution."""
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def one(m: re.Match[str]) -> str:
        name, op, arg = m.group(1), m.group(2), m.group(3)
        if env.get(name):
            return env[name]
        if op == ":?":
            raise KeyError(f"{name}: {arg}")
        return arg or ""

    return re.sub(r"\$\{(\w+)(?:(:-|:\?)([^}]*))?\}", one, value)


def compose(env: dict[str, str] = ENV) -> dict[str, Any]:
    return interpolate(yaml.safe_load((ROOT / "docker-compose.yml").read_text()), env)


def dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n\s*", " ", (ROOT / "Dockerfile").read_text())
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    return [(ln.split(None, 1)[0].upper(), ln.split(None, 1)[1]) for ln in lines]


def chart_objects(values: dict[str, Any]) -> list[dict[str, Any]]:
    with helm.Chart.load(CHART) as chart:
        manifests = chart.render(
            {"adminKey": ENV["COSTGATE_ADMIN_KEY"], "postgresql": {"password": "pw"}, **values},
            name="demo",
            namespace="llm",
        )
    return [d for p, t in manifests.items() if p.endswith(".yaml") for d in yaml.safe_load_all(t) if d]


def container(objects: list[dict[str, Any]], name: str) -> dict[str, Any]:
    deployments = [o for o in objects if o["kind"] in ("Deployment", "StatefulSet")]
    return next(c for d in deployments for c in d["spec"]["template"]["spec"]["containers"] if c["name"] == name)


@pytest.fixture(scope="module")
def chart() -> list[dict[str, Any]]:
    return chart_objects({"engine": {"enabled": True}})


def test_services_profiles_and_required_secrets() -> None:
    services = compose()["services"]
    assert set(services) == {"gateway", "redis", "postgresql", "engine"}
    assert services["engine"]["profiles"] == ["gpu"]
    assert all("profiles" not in s for n, s in services.items() if n != "engine")
    assert services["gateway"]["depends_on"] == {
        "redis": {"condition": "service_healthy"},
        "postgresql": {"condition": "service_healthy"},
    }
    (device,) = services["engine"]["deploy"]["resources"]["reservations"]["devices"]
    assert device["driver"] == "nvidia" and device["capabilities"] == ["gpu"]
    assert "./models:/models:ro" in services["engine"]["volumes"]
    with pytest.raises(KeyError, match="COSTGATE_ADMIN_KEY"):
        compose({k: v for k, v in ENV.items() if k != "COSTGATE_ADMIN_KEY"})


def test_gateway_matches_the_chart(chart: list[dict[str, Any]]) -> None:
    gw = compose()["services"]["gateway"]
    pod = container(chart, "gateway")
    assert gw["command"] == pod["args"]
    assert gw["ports"] == [f"{pod['ports'][0]['containerPort']}:4000"]
    secret = next(o for o in chart if o["kind"] == "Secret")
    assert {"COSTGATE_ADMIN_KEY", "COSTGATE_DATABASE_URL"} <= set(gw["environment"]) & set(secret["stringData"])
    assert pod["readinessProbe"]["httpGet"]["path"] in " ".join(gw["healthcheck"]["test"])
    assert gw["image"] == f"{pod['image'].split(':')[0]}:{pod['image'].split(':')[1]}"


@pytest.mark.parametrize("service", ["redis", "postgresql"])
def test_backing_services_use_the_charts_images(chart: list[dict[str, Any]], service: str) -> None:
    assert compose()["services"][service]["image"] == container(chart, service)["image"]


def test_engine_matches_the_chart(chart: list[dict[str, Any]]) -> None:
    engine = compose()["services"]["engine"]
    vllm = container(chart, "vllm")
    assert engine["image"] == vllm["image"]
    assert engine["command"] == vllm["args"]
    assert engine["environment"]["HF_HUB_OFFLINE"] == "1"


@pytest.mark.parametrize("config, engine", [("config.yaml", False), ("config.gpu.yaml", True)])
def test_compose_configs_load_and_name_compose_services(config: str, engine: bool) -> None:
    services = compose()["services"]
    env = {k: str(v) for k, v in services["gateway"]["environment"].items()}
    settings = load_settings(ROOT / "deploy" / "compose" / config, environ=env)
    assert settings.admin_key == ENV["COSTGATE_ADMIN_KEY"]
    assert settings.database_url == "postgresql://costgate:pw@postgresql:5432/costgate"
    assert settings.redis_url == "redis://redis:6379/0"
    assert services["postgresql"]["environment"]["POSTGRES_USER"] == "costgate"
    local = [m for m in settings.models if m.api_base == "http://engine:8000/v1"]
    assert bool(local) == engine
    names = {m.name for m in settings.models}
    for cascade in settings.cascades:
        assert set(cascade.tiers) <= names


def test_dockerfile_builds_what_the_chart_runs(chart: list[dict[str, Any]]) -> None:
    steps = dockerfile()
    assert steps[0] == ("FROM", "python:3.11-slim AS build")
    for kind, args in steps:
        if kind == "COPY" and not args.startswith("--from"):
            *sources, _ = args.split()
            for source in sources:
                assert (ROOT / source).exists(), f"COPY {source}: no such path"
    values = dict(steps)
    pod = container(chart, "gateway")
    deployment = next(o for o in chart if o["kind"] == "Deployment" and o["metadata"]["name"] == "demo-costgate")
    assert values["USER"] == str(deployment["spec"]["template"]["spec"]["securityContext"]["runAsUser"])
    assert values["EXPOSE"] == str(pod["ports"][0]["containerPort"])
    assert json.loads(values["ENTRYPOINT"]) == ["costgate"]
    assert json.loads(values["CMD"]) == pod["args"]
    assert pod["livenessProbe"]["httpGet"]["path"] in values["HEALTHCHECK"]
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["costgate"] == "gateway.cli:main"
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert ".venv" in ignored and ".git" in ignored
