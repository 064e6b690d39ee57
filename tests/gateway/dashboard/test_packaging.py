"""Every template and static file of the dashboard is shipped by pyproject's package-data
(they are not Python packages, so `packages.find` alone would leave them out of a wheel)."""

from __future__ import annotations

import tomllib
from fnmatch import fnmatch
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_package_data_covers_every_dashboard_file() -> None:
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    mine = patterns["gateway.dashboard"]
    package = ROOT / "gateway" / "dashboard"
    files = [
        p.relative_to(package).as_posix() for p in package.rglob("*") if p.is_file() and p.suffix not in (".py", ".pyc")
    ]
    assert {"templates/base.html", "static/dashboard.css", "static/dashboard.js"} <= set(files)
    missing = [f for f in files if not any(fnmatch(f, pattern) for pattern in mine)]
    assert not missing, f"not in package-data: {missing}"
