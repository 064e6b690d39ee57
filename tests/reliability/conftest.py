"""Fixtures the reliability tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.reliability.services import FaultyUpstreamProcess


@pytest.fixture(scope="module")
def faulty(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultyUpstreamProcess]:
    """tests/fakes/faulty_upstream.py, one per test module: its model names pick the fault."""
    up = FaultyUpstreamProcess(tmp_path_factory.mktemp("faulty"))
    yield up
    up.stop()
