from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from tests.support import FakeUpstream, GatewayProcess, model

# The fast lane (`pytest -m "not slow"`, issue 25) starts no process: a test that boots
# `costgate serve`, a fake in a subprocess, a browser or vLLM carries `@pytest.mark.slow`.
# The guard below keeps the marks honest: outside a slow test, starting a process fails the test
# (fixtures a test asks for are set up inside its setup phase, so they are caught too).
_running: list[pytest.Item] = []
_real_popen_init = subprocess.Popen.__init__


def _guarded_popen_init(self: subprocess.Popen, *args: object, **kwargs: object) -> None:
    item = _running[-1] if _running else None
    if item is not None and item.get_closest_marker("slow") is None:
        raise RuntimeError(f"{item.nodeid} starts a process ({args[0] if args else kwargs.get('args')}): mark it slow")
    _real_popen_init(self, *args, **kwargs)  # type: ignore[arg-type]


def pytest_configure(config: pytest.Config) -> None:
    subprocess.Popen.__init__ = _guarded_popen_init  # type: ignore[method-assign]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> object:
    _running.append(item)
    try:
        return (yield)
    finally:
        _running.pop()


@pytest.fixture(scope="session")
def fake_upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeUpstream]:
    fake = FakeUpstream(tmp_path_factory.mktemp("fake"))
    yield fake
    fake.stop()


def standard_models(api_base: str) -> list[dict]:
    return [
        model("small", "echo-small", api_base, "0.15", "0.6"),
        model("large", "echo-large", api_base, "2.5", "10"),
        model("broken", "fail-500", api_base, fallbacks=["small"]),
        model("always-500", "fail-500", api_base),
        model("always-429", "fail-429", api_base),
        model("flaky", "flaky", api_base),
        model("html", "html", api_base),
        model("garbage", "garbage", api_base),
        model("truncate", "truncate", api_base),
        model("drip", "drip", api_base),
        model("no-usage", "no-usage", api_base),
        model("reject", "reject", api_base),
        model("slow", "slow", api_base, timeout_s=0.5, max_retries=0),
        model("gpt-4o-mini", "gpt-4o-mini", api_base) | {"price": None},  # priced from litellm's map
        model("fields", "echo-fields", api_base, extra_params=["top_k", "min_p"], drop_params=["seed"]),
    ]


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, fake_upstream: FakeUpstream) -> Iterator[GatewayProcess]:
    gw = GatewayProcess({"models": standard_models(fake_upstream.url)}, tmp_path_factory.mktemp("gw"))
    yield gw
    gw.stop()


@pytest.fixture(scope="module")
def key(gateway: GatewayProcess) -> str:
    return gateway.new_key("team-a")


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path
