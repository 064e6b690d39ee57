"""deploy/helm/costgate rendered for several value sets with Helm's own Go SDK (helm-python-sdk,
no helm binary), every object validated against Kubernetes' schemas (kubernetes-validate),
the chart linted, and the config it renders loaded by the gateway's own settings loader."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

import helm_python as helm
import kubernetes_validate
import pytest
import yaml

from gateway.config.settings import load_settings

CHART = Path(__file__).resolve().parents[2] / "deploy" / "helm" / "costgate"
KUBE = "1.30"
ADMIN = "sk-cg-admin-0123456789abcdef"
METRICS = "sk-cg-metrics-0123456789abcdef"
MODELS = [{"name": "gpt-4o-mini", "provider": "openai", "api_key": "env:OPENAI_API_KEY"}]

VALUE_SETS: dict[str, dict[str, Any]] = {
    "bundled postgres and redis": {
        "adminKey": ADMIN,
        "postgresql": {"password": "p@ss/word"},
        "providerKeys": {"OPENAI_API_KEY": "sk-test"},
        "config": {"models": MODELS},
    },
    "sqlite, one replica": {
        "adminKey": ADMIN,
        "postgresql": {"enabled": False},
        "redis": {"enabled": False},
        "autoscaling": {"enabled": False},
        "replicaCount": 1,
        "podDisruptionBudget": {"enabled": False},
    },
    "external services, existing secret": {
        "existingSecret": "costgate-prod",
        "postgresql": {"enabled": False},
        "metrics": {"keyInExistingSecret": True},
        "redis": {"enabled": False, "url": "redis://cache.example:6379/1"},
        "autoscaling": {"enabled": False},
        "replicaCount": 3,
    },
    "engine and service monitor": {
        "adminKey": ADMIN,
        "postgresql": {"password": "pw"},
        "metrics": {"key": METRICS},
        "engine": {"enabled": True},
        "serviceMonitor": {"enabled": True, "labels": {"release": "kps"}},
        "config": {"models": MODELS, "cascades": [{"name": "auto", "tiers": ["local-llm", "gpt-4o-mini"]}]},
    },
    "engine on an existing model volume": {
        "adminKey": ADMIN,
        "database": {"url": "postgresql://u:p@db:5432/c"},
        "postgresql": {"enabled": False},
        "engine": {"enabled": True, "gpus": 2, "modelVolume": {"existingClaim": "llama-weights"}},
    },
}


def render(values: dict[str, Any]) -> list[dict[str, Any]]:
    with helm.Chart.load(CHART) as chart:
        manifests = chart.render(values, name="demo", namespace="llm")
    return [
        doc for path, text in manifests.items() if path.endswith(".yaml") for doc in yaml.safe_load_all(text) if doc
    ]


def by_kind(objects: list[dict[str, Any]], kind: str, suffix: str = "") -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"].endswith(suffix or "costgate")]
    return found


def matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def test_chart_lints_clean() -> None:
    report = helm.lint(CHART, VALUE_SETS["bundled postgres and redis"], strict=True)
    assert report["errors"] == []
    assert all(m["severity"] < 2 for m in report["messages"]), report["messages"]


@pytest.mark.parametrize("name", VALUE_SETS)
def test_every_object_is_valid_kubernetes(name: str) -> None:
    objects = render(VALUE_SETS[name])
    kinds = {o["kind"] for o in objects}
    assert {"Deployment", "Service", "ConfigMap"} <= kinds
    for obj in objects:
        if obj["kind"] == "ServiceMonitor":  # a CRD: no schema in kubernetes-validate; checked below
            continue
        kubernetes_validate.validate(obj, KUBE, strict=True)


@pytest.mark.parametrize("name", VALUE_SETS)
def test_gateway_wiring(name: str) -> None:
    objects = render(VALUE_SETS[name])
    deployment = by_kind(objects, "Deployment")
    pod = deployment["spec"]["template"]
    (gateway,) = pod["spec"]["containers"]
    assert gateway["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert gateway["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert gateway["ports"][0]["containerPort"] == 4000 and gateway["resources"]["requests"]
    service = by_kind(objects, "Service")
    assert matches(service["spec"]["selector"], pod["metadata"]["labels"])
    for kind in ("HorizontalPodAutoscaler", "PodDisruptionBudget"):
        found = [o for o in objects if o["kind"] == kind]
        if kind == "PodDisruptionBudget" and found:
            assert matches(found[0]["spec"]["selector"]["matchLabels"], pod["metadata"]["labels"])
        if kind == "HorizontalPodAutoscaler" and found:
            assert found[0]["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"]
            assert "replicas" not in deployment["spec"]  # the HPA owns the count
    secret_name = gateway["envFrom"][0]["secretRef"]["name"]
    secrets = [o for o in objects if o["kind"] == "Secret"]
    env = {
        "COSTGATE_ADMIN_KEY": "from-existing-secret",
        "COSTGATE_DATABASE_URL": "postgresql://u@h/db",
        "COSTGATE_METRICS_KEY": "metrics-from-existing-secret",
    }
    if secrets:
        assert secrets[0]["metadata"]["name"] == secret_name
        env = dict(secrets[0]["stringData"])
    else:
        assert secret_name == VALUE_SETS[name]["existingSecret"]
    config_map = by_kind(objects, "ConfigMap", "-config")
    config_file = CHART.parent / "rendered-config.yaml"
    try:
        config_file.write_text(config_map["data"]["config.yaml"])
        settings = load_settings(config_file, environ=env)  # the gateway accepts what the chart renders
    finally:
        config_file.unlink(missing_ok=True)
    assert settings.admin_key == env["COSTGATE_ADMIN_KEY"]
    values = VALUE_SETS[name]
    keyed = values.get("metrics", {}).get("key") or values.get("metrics", {}).get("keyInExistingSecret")
    assert settings.metrics_key == (env["COSTGATE_METRICS_KEY"] if keyed else None)  # /metrics needs the key
    if values.get("postgresql", {}).get("enabled", True):
        password = quote(values["postgresql"]["password"], safe="")  # escaped for the URL
        assert settings.database_url == f"postgresql://costgate:{password}@demo-costgate-postgresql:5432/costgate"
    elif name == "sqlite, one replica":
        assert settings.database_url.startswith("sqlite:////data/")
    if values.get("redis", {}).get("enabled", True):
        assert settings.redis_url == "redis://demo-costgate-redis:6379/0"
        assert by_kind(objects, "Service", "-redis")["spec"]["ports"][0]["port"] == 6379


@pytest.mark.parametrize("name", ["engine and service monitor", "engine on an existing model volume"])
def test_engine_gets_gpus_a_model_volume_and_a_place_in_the_gateway_config(name: str) -> None:
    values = VALUE_SETS[name]
    objects = render(values)
    engine = by_kind(objects, "Deployment", "-engine")
    (vllm,) = engine["spec"]["template"]["spec"]["containers"]
    gpus = str(values["engine"].get("gpus", 1))
    assert str(vllm["resources"]["limits"]["nvidia.com/gpu"]) == gpus
    assert {"name": "models", "mountPath": "/models", "readOnly": True} in vllm["volumeMounts"]
    claim = next(v for v in engine["spec"]["template"]["spec"]["volumes"] if v["name"] == "models")
    claim_name = claim["persistentVolumeClaim"]["claimName"]
    existing = values["engine"].get("modelVolume", {}).get("existingClaim")
    assert claim_name == (existing or "demo-costgate-models")
    assert bool([o for o in objects if o["kind"] == "PersistentVolumeClaim"]) == (not existing)
    assert vllm["args"][:2] == ["--model", "/models/model"]
    config = yaml.safe_load(by_kind(objects, "ConfigMap", "-config")["data"]["config.yaml"])
    local = next(m for m in config["models"] if m["name"] == "local-llm")
    assert local["api_base"] == "http://demo-costgate-engine:8000/v1"
    assert by_kind(objects, "Service", "-engine")["spec"]["ports"][0]["port"] == 8000


def test_service_monitor_scrapes_the_gateway_service() -> None:
    objects = render(VALUE_SETS["engine and service monitor"])
    (monitor,) = [o for o in objects if o["kind"] == "ServiceMonitor"]
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1" and monitor["metadata"]["labels"]["release"] == "kps"
    service = by_kind(objects, "Service")
    assert matches(monitor["spec"]["selector"]["matchLabels"], service["metadata"]["labels"])
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["path"] == "/metrics" and endpoint["port"] == service["spec"]["ports"][0]["name"]
    # /metrics needs the metrics key: the scraper sends it from the Secret that holds it
    secret = by_kind(objects, "Secret", "-secrets")
    assert endpoint["authorization"] == {
        "type": "Bearer",
        "credentials": {"name": secret["metadata"]["name"], "key": "COSTGATE_METRICS_KEY"},
    }
    assert secret["stringData"]["COSTGATE_METRICS_KEY"] == METRICS


def test_without_a_metrics_key_the_monitor_sends_none_and_the_notes_warn() -> None:
    values = {**VALUE_SETS["engine and service monitor"], "metrics": {"key": ""}}
    (monitor,) = [o for o in render(values) if o["kind"] == "ServiceMonitor"]
    assert "authorization" not in monitor["spec"]["endpoints"][0]
    with helm.Chart.load(CHART) as chart:
        notes = chart.render(values, name="demo", namespace="llm")["costgate/templates/NOTES.txt"]
    assert "/metrics is open" in notes


@pytest.mark.parametrize(
    "values, error",
    [
        ({}, "adminKey is required"),
        ({"adminKey": ADMIN}, "postgresql.password is required"),
        ({"adminKey": ADMIN, "postgresql": {"enabled": False}}, "SQLite allows one gateway replica"),
        ({"adminKey": ADMIN, "postgresql": {"password": "x"}, "service": {"type": "Bogus"}}, "/service/type"),
        ({"adminKey": "short", "postgresql": {"password": "x"}}, "adminKey"),
        ({"adminKey": ADMIN, "postgresql": {"password": "x"}, "config": {"database_url": "sqlite://"}}, "config"),
        ({"adminKey": ADMIN, "postgresql": {"password": "x"}, "replicas": 3}, "replicas"),
    ],
)
def test_bad_values_are_refused(values: dict[str, Any], error: str) -> None:
    with pytest.raises(helm.HelmError) as err:
        render(values)
    assert error in str(err.value)
