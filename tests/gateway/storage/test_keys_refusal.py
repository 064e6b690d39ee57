"""A missing or foreign key is refused before the database is asked, in words that fit both
APIs' clients: an OpenAI client sends `Authorization: Bearer`, an Anthropic one `x-api-key`."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.core.errors import AuthenticationFailed
from gateway.storage.db import create_engine
from gateway.storage.keys import KeyStore


@pytest.mark.parametrize("secret", [None, "", "sk-ant-api03-abc", "bad"])
async def test_a_missing_or_foreign_key_names_both_ways_to_send_one(tmp_path: Path, secret: str | None) -> None:
    engine = create_engine(f"sqlite:///{tmp_path}/keys.db")
    try:
        with pytest.raises(AuthenticationFailed) as refused:
            await KeyStore(engine).authenticate(secret)
    finally:
        await engine.dispose()
    assert "'Authorization: Bearer sk-cg-…'" in str(refused.value) and "'x-api-key: sk-cg-…'" in str(refused.value)
