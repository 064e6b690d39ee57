"""The config a one-shot command reads (`costgate db | distill | reconcile`)."""

from __future__ import annotations

import sys

import yaml

from gateway.config.settings import Settings, load_settings


def read_config(command: str, path: str | None) -> Settings | None:
    """The settings at `path` (None: the embedded defaults); a file that cannot be read or is
    not a valid config is said in one line on stderr, and None returned (the command exits 2)."""
    try:
        return load_settings(path)
    except (OSError, yaml.YAMLError, ValueError) as err:
        print(f"costgate {command}: config {path}: {' '.join(str(err).split())}", file=sys.stderr)
        return None
