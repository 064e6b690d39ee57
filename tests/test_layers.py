"""The layers CI checks (issue 25): `lint-imports` fails the build on an import circle, not only
on an import that points up. Shown on a copy of the tree with two modules that import each other
where no layers contract looks (inside policies/semantic_cache)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import ROOT

pytestmark = pytest.mark.slow  # runs lint-imports in a process, twice

LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint(tree: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(tree / "pyproject.toml"), "--no-cache"],
        cwd=tree,
        env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
    )


def copy_of_the_tree(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    tree.mkdir()
    for package in ("gateway", "policies", "engine"):
        shutil.copytree(ROOT / package, tree / package, ignore=shutil.ignore_patterns("__pycache__", "*.onnx", "*.npz"))
    shutil.copy(ROOT / "pyproject.toml", tree)
    return tree


def test_the_tree_as_it_is_keeps_every_contract(tmp_path: Path) -> None:
    result = lint(copy_of_the_tree(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr


def test_an_added_circle_fails_the_build(tmp_path: Path) -> None:
    tree = copy_of_the_tree(tmp_path)
    cache = tree / "policies" / "semantic_cache"
    (cache / "circle_a.py").write_text("from policies.semantic_cache import circle_b  # noqa: F401\n")
    (cache / "circle_b.py").write_text("from policies.semantic_cache import circle_a  # noqa: F401\n")
    result = lint(tree)
    assert result.returncode != 0
    assert "no circles" in result.stdout and "BROKEN" in result.stdout, result.stdout
