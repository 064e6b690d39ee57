"""A model's first start on this machine, kept for the next process: its first start is then
estimated from what this machine measured (engine/cold_start.py) rather than from the prior
configured for the model. One small JSON file a model in the engine's log directory; a missing
or damaged one is no estimate, never an error."""

from __future__ import annotations

import json
import logging
from pathlib import Path

log = logging.getLogger("costgate.engine")


def first_start_record(log_dir: Path, served_name: str) -> Path:
    """Where a model's first start on this machine is kept."""
    return log_dir / f"{served_name.replace('/', '_')}.first-start.json"


def measured_first_start(record: Path) -> float | None:
    """The engine's own first start, as a previous process measured it here; None if none was."""
    try:
        value = json.loads(record.read_text())["first_start_s"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return float(value) if isinstance(value, int | float) and value > 0 else None


def record_first_start(record: Path, seconds: float) -> None:
    try:
        record.parent.mkdir(parents=True, exist_ok=True)
        record.write_text(json.dumps({"first_start_s": round(seconds, 1)}))
    except OSError as err:  # an estimate for later, not worth failing a ready engine over
        log.warning("could not keep the engine's first start in %s: %s", record, err)
