"""The reader `costgate cache calibrate --team` is given (gateway/commands/cache_cli.py), on a real SQLite
database as a gateway leaves it: the team's semantic verdicts as labelled pairs, the team found
by name or id, and every way it can go wrong as a ValueError the command prints.
tests/gateway/test_cache_calibrate_team.py runs the whole command against a running gateway."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml

from gateway.commands.cache_cli import team_labels
from gateway.storage.db import create_engine, create_tables
from gateway.storage.keys import KeyStore
from gateway.storage.verdict_store import AnsweredRequest, FeedbackRow, FeedbackStore
from policies.answer_verdict import Verdict
from policies.semantic_cache.verifier_calibration import Labelled


async def a_gateways_database(url: str) -> str:
    """Team `sem` with a wrong and a right semantic hit and an exact one; team `other` with one."""
    engine = create_engine(url)
    try:
        await create_tables(engine)
        keys = KeyStore(engine)
        sem, other = await keys.create_team("sem"), await keys.create_team("other")
        store = FeedbackStore(engine)
        await store.create()
        for i, (team, kind, verdict, pair) in enumerate(
            [
                (sem.id, "semantic", Verdict.WRONG, Labelled("reset my password?", "change my password?", False)),
                (sem.id, "exact", Verdict.WRONG, None),  # an exact hit has no pair: not a label
                (sem.id, "semantic", Verdict.RIGHT, Labelled("learn Rust fast?", "learn Rust quickly?", True)),
                (other.id, "semantic", Verdict.WRONG, Labelled("another team's", "question", False)),
            ]
        ):
            answered = AnsweredRequest(f"req_{i}", team, None, "small", "small", kind, 100.0 + i)
            await store.record(FeedbackRow(answered, verdict, "key", 200.0 + i, None, pair))
        return sem.id
    finally:
        await engine.dispose()


@pytest.fixture
def config(tmp_path: Path) -> tuple[str, str]:
    url = f"sqlite:///{tmp_path / 'costgate.db'}"
    team_id = asyncio.run(a_gateways_database(url))
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"database_url": url}))
    return str(path), team_id


def test_a_teams_semantic_verdicts_are_its_labelled_pairs(config: tuple[str, str]) -> None:
    path, team_id = config
    expected = [
        Labelled("reset my password?", "change my password?", False),
        Labelled("learn Rust fast?", "learn Rust quickly?", True),
    ]
    assert team_labels(path, "sem") == expected
    assert team_labels(path, team_id) == expected  # by id too


def test_an_unknown_team_is_a_value_error(config: tuple[str, str]) -> None:
    with pytest.raises(ValueError, match="no team 'nobody' in the gateway's database"):
        team_labels(config[0], "nobody")


def test_a_config_that_is_not_yaml_is_a_value_error(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("database_url: [unclosed\n")
    with pytest.raises(ValueError, match="not valid YAML"):
        team_labels(str(path), "sem")


def test_a_database_without_the_gateways_tables_is_a_value_error(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"database_url": f"sqlite:///{tmp_path / 'empty.db'}"}))
    with pytest.raises(ValueError, match="cannot read the gateway's database"):
        team_labels(str(path), "sem")
