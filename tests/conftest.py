from __future__ import annotations

import asyncio
import asyncio.runners
import logging
import os
import subprocess
import sys
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
    asyncio.runners._cancel_all_tasks = _cancel_all_tasks_within  # type: ignore[attr-defined]


CLOSE_WAIT_S = 10.0


def _cancel_all_tasks_within(loop: asyncio.AbstractEventLoop) -> None:
    """asyncio's own end of a runner (the session's event loop, pytest-asyncio's), bounded: the
    tasks left are cancelled and waited for at most CLOSE_WAIT_S, and those that would not end are
    named instead of waited for forever. Seen once in a worker (pytest-xdist): SQLAlchemy's graceful
    close of an invalidated aiosqlite connection whose worker thread had already ended, awaited at
    the session's end, held the whole run."""
    tasks = asyncio.all_tasks(loop)
    if not tasks:
        return
    for task in tasks:
        task.cancel()
    done, pending = loop.run_until_complete(asyncio.wait(tasks, timeout=CLOSE_WAIT_S))
    for task in pending:
        print(f"conftest: a task did not end within {CLOSE_WAIT_S:g} s of the loop's close: {task!r}", file=sys.stderr)
    for task in done:
        if not task.cancelled() and task.exception() is not None:
            loop.call_exception_handler(
                {"message": "unhandled exception during the loop's close", "exception": task.exception(), "task": task}
            )


# The files that take longest (`--durations`, 2026-12-03: 25-60 s each, a third of a worker's
# time between them), started first so that no worker is left running one alone at the end.
LONGEST_FILES = (
    "tests/engine/test_bundled_model.py",
    "tests/engine/test_engine_e2e.py",
    "tests/reliability/test_bad_input.py",
    "tests/reliability/test_crash_holds.py",
    "tests/gateway/storage/test_migrations.py",
    "tests/reliability/test_hostile_fields.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Longest files first, then the other files with slow tests, then the rest (stable: files
    keep their order otherwise), so the workers (pytest-xdist, whole files a worker, in this
    order: `--no-loadscope-reorder` in pyproject.toml) end on short in-process files rather than
    one waiting on the other's long boot."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow") is not None}

    def rank(item: pytest.Item) -> int:
        path = item.path.relative_to(item.config.rootpath).as_posix()
        if path in LONGEST_FILES:
            return LONGEST_FILES.index(path)
        return len(LONGEST_FILES) + (item.path not in slow_files)

    items.sort(key=rank)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> object:
    _running.append(item)
    try:
        return (yield)
    finally:
        _running.pop()


@pytest.fixture(autouse=True)
def _logging_as_it_was() -> Iterator[None]:
    """Each test leaves logging as it found it: `costgate` commands run in process configure the
    root logger (a handler on the stderr of the moment, which pytest closes after the test), and
    a later test's log lines would go to that closed stream."""
    root, httpx_logger = logging.getLogger(), logging.getLogger("httpx")
    handlers, level, httpx_level = list(root.handlers), root.level, httpx_logger.level
    yield
    for handler in [h for h in root.handlers if h not in handlers]:
        root.removeHandler(handler)
    for handler in handlers:
        if handler not in root.handlers:
            root.addHandler(handler)
    root.setLevel(level)
    httpx_logger.setLevel(httpx_level)


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
