"""Fixtures the policy tests share."""

from __future__ import annotations

import pytest

from policies.semantic_cache.embedder import Embedder


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    """The shipped MiniLM, loaded once for the session (each test module loaded its own)."""
    return Embedder()
