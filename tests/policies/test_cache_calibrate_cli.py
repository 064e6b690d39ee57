"""`costgate cache calibrate FILE` on a team's own labelled pairs, as a user runs it."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from policies.semantic_cache.verifier import Verifier
from tests.support import ROOT, _env

pytestmark = pytest.mark.slow  # boots processes: not in the fast lane

THINGS = [
    "bake bread",
    "learn French",
    "fix a flat tyre",
    "train a puppy",
    "grow tomatoes",
    "write a CV",
    "save money",
    "start running",
    "paint a room",
    "brew coffee",
    "plant a tree",
    "clean an oven",
    "tie a tie",
    "learn chess",
    "sleep better",
    "speak in public",
    "meditate",
    "knit a scarf",
    "build a shed",
    "learn to swim",
]
OPENERS = [
    ("How do I", "How can I"),
    ("What is the best way to", "What's the easiest way to"),
    ("Any tips to", "How should I"),
    ("How do I", "What steps do I take to"),
]


def pairs() -> list[dict]:
    rows = []
    for thing, (a, b) in itertools.product(THINGS, OPENERS):
        rows.append({"a": f"{a} {thing}?", "b": f"{b} {thing}?", "duplicate": True})
    for (x, y), (a, _) in itertools.product(zip(THINGS, THINGS[1:] + THINGS[:1]), OPENERS):
        rows.append({"a": f"{a} {x}?", "b": f"{a} {y}?", "duplicate": False})
    for thing, suffix in itertools.product(THINGS, ("for a living", "at night", "as a child", "badly")):
        rows.append({"a": f"How do I {thing}?", "b": f"How do I {thing} {suffix}?", "duplicate": False})
    for thing in THINGS:
        for n in (2, 3, 5, 10):
            rows.append(
                {"a": f"How do I {thing} in {n} days?", "b": f"How do I {thing} in {n * 3} days?", "duplicate": False}
            )
    return rows


def distinct() -> int:
    return len({(r["a"], r["b"]) for r in pairs()})


def calibrate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gateway.cli", "cache", "calibrate", *args],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=ROOT,
        timeout=600,
    )


def test_calibrate_writes_a_verifier_the_gateway_can_load(tmp_path: Path) -> None:
    data = tmp_path / "pairs.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in pairs()))
    out = tmp_path / "team-verifier.npz"
    result = calibrate(str(data), "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert f"fitted on {distinct()} labelled pairs" in result.stdout and str(out) in result.stdout
    verifier = Verifier.load(out)
    assert verifier.weights.any() and verifier.min_cosine > 0
    assert len(verifier.rates) > 0  # this easy data certifies some bound
    for rate in verifier.rates:  # each certified bound is reported with its held-out figures
        assert f"{rate:17.3f}" in result.stdout


def test_calibrate_reads_adjudicated_candidates_from_several_files(tmp_path: Path) -> None:
    rows = [{"query": r["b"], "stored": r["a"], "same": r["duplicate"], "unsure": False} for r in pairs()]
    (tmp_path / "one.jsonl").write_text("\n".join(json.dumps(r) for r in rows[:200]))
    (tmp_path / "two.jsonl").write_text("\n".join(json.dumps(r) for r in rows[150:]))  # 50 judged twice
    result = calibrate(str(tmp_path / "one.jsonl"), str(tmp_path / "two.jsonl"), "--out", str(tmp_path / "v.npz"))
    assert result.returncode == 0, result.stderr
    assert f"fitted on {distinct()} labelled pairs" in result.stdout


def test_calibrate_refuses_bad_input(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"a": "x", "b": "y"}\n')
    result = calibrate(str(bad), "--out", str(tmp_path / "v.npz"))
    assert result.returncode == 2 and "duplicate" in result.stderr
    few = tmp_path / "few.jsonl"
    few.write_text("\n".join(json.dumps(r) for r in pairs()[:30]))
    result = calibrate(str(few), "--out", str(tmp_path / "v.npz"))
    assert result.returncode == 2 and "at least" in result.stderr
    both = tmp_path / "both.jsonl"
    both.write_text('{"a": "x", "b": "y", "duplicate": true}\n{"a": "x", "b": "y", "duplicate": false}\n')
    result = calibrate(str(both), "--out", str(tmp_path / "v.npz"))
    assert result.returncode == 2 and "both ways" in result.stderr
    not_json = tmp_path / "not-json.jsonl"
    not_json.write_text('{"a": "x", "b": "y", "duplicate": true}\n{"a": "x",\n')
    result = calibrate(str(not_json), "--out", str(tmp_path / "v.npz"))
    assert result.returncode == 2 and result.stderr.startswith(f"costgate cache calibrate: {not_json}:2: not JSON (")
    assert result.stderr.count("\n") == 1  # one line, naming the file and line, not json's bare "line 1 column 10"
    assert not (tmp_path / "v.npz").exists()


def test_an_out_it_cannot_write_is_one_line(tmp_path: Path) -> None:
    data = tmp_path / "pairs.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in pairs()))
    (tmp_path / "a-file").write_text("")
    out = tmp_path / "a-file" / "v.npz"  # its directory is a file
    result = calibrate(str(data), "--out", str(out))
    assert result.returncode == 2 and result.stderr.startswith(f"costgate cache calibrate: cannot write {out}: ")
    assert result.stderr.count("\n") == 1
