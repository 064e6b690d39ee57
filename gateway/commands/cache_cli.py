"""`costgate cache calibrate --team NAME`: the team's labelled pairs, read from the gateway's database.

The command itself (policies/semantic_cache/calibrate_cli.py) is pure; this is the reader it is given:
the team found by name (or id) among the gateway's teams, and every semantic hit of the team
that got a verdict through POST /v1/feedback (or the dashboard's button), as a labelled pair
(gateway/storage/verdict_store.py `labelled`).
"""

from __future__ import annotations

import asyncio

import yaml
from sqlalchemy.exc import SQLAlchemyError

from gateway.core.errors import GatewayError
from policies.semantic_cache.verifier_calibration import Labelled


async def _read(config: str | None, team: str) -> list[Labelled]:
    from gateway.config.settings import load_settings
    from gateway.storage.db import create_engine
    from gateway.storage.keys import KeyStore
    from gateway.storage.verdict_store import FeedbackStore

    engine = create_engine(load_settings(config).database_url)
    try:
        try:
            found = await KeyStore(engine).find_team(team)
        except GatewayError as err:
            raise ValueError(f"{err.message} in the gateway's database") from None
        store = FeedbackStore(engine)
        await store.create()  # a gateway that never took feedback has no table yet
        return await store.labelled(found.id)
    finally:
        await engine.dispose()


def team_labels(config: str | None, team: str) -> list[Labelled]:
    """The reader `costgate cache calibrate --team` is given; what goes wrong is a ValueError."""
    try:
        return asyncio.run(_read(config, team))
    except yaml.YAMLError as err:
        raise ValueError(f"config {config}: not valid YAML: {' '.join(str(err).split())}") from None
    except SQLAlchemyError as err:
        raise ValueError(f"cannot read the gateway's database: {err.__class__.__name__}: {err}") from None
