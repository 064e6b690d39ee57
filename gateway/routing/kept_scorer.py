"""A cascade's refitted (or upgraded-to) learned scorer, kept in the data directory across
restarts (`cascades/<name>.learned.json`). The file names the scorer the config named when it was
written (`refit_of`), so a config that names another scorer since does not load it; an unreadable
file is logged and not loaded. Written whole to a `.partial` file and renamed, so a crash leaves
the old file or the new one, never half of one."""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path

from policies.scorers.learned import LearnedModel

log = logging.getLogger("costgate.cascade")


@dataclass(frozen=True, slots=True)
class KeptScorer:
    cascade: str
    refit_of: str  # the scorer the config names: a file written from another one is not loaded
    path: Path

    @classmethod
    def in_dir(cls, data_dir: Path, cascade: str, refit_of: str) -> KeptScorer:
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", cascade) + ".learned.json"
        return cls(cascade, refit_of, data_dir / "cascades" / name)

    def read(self) -> LearnedModel | None:
        if not self.path.is_file():
            return None
        try:
            if json.loads(self.path.read_text()).get("refit_of") != self.refit_of:
                return None  # refitted from a scorer the config no longer names
            return LearnedModel.load(self.path)
        except (OSError, ValueError) as err:
            log.warning("cascade %s: the refitted scorer %s is not loaded: %s", self.cascade, self.path, err)
            return None

    def write(self, model: LearnedModel) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            partial = self.path.with_suffix(".partial")
            partial.write_text(json.dumps({**model.to_json(), "refit_of": self.refit_of}) + "\n")
            partial.replace(self.path)
        except OSError as err:
            log.warning("cascade %s: the refitted scorer is not kept across restarts: %s", self.cascade, err)
