"""`costgate cascade train` writes a scorer and its calibration curve, which the gateway loads."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gateway.commands.cascade_cli import with_query_vectors
from policies.quality_controller import Policy, QualityController
from policies.scorers.answer_features import features
from policies.scorers.learned import LearnedModel, LearnedScorer, auc
from policies.scorers.training import Matrix, TrainingExample, train_matrix
from policies.threshold_calibration import Calibration
from tests.policies.test_scorers import synthetic
from tests.support import ROOT, _env

pytestmark = pytest.mark.slow  # boots processes: not in the fast lane


def examples(rng: random.Random, n: int) -> list[TrainingExample]:
    """Synthetic problems whose cheap answers are right when their arithmetic is; the last tier
    is right 90% of the time, and agrees with the cheap answer exactly when both are right."""
    out = []
    for e in synthetic(rng, n):
        last_right = rng.random() < 0.9
        out.append(TrainingExample(e.item, e.label, last_right, e.label and last_right))
    return out


def train(tmp_path: Path, data: list[TrainingExample], *extra: str) -> subprocess.CompletedProcess:
    path = tmp_path / "examples.jsonl"
    path.write_text(
        "".join(
            json.dumps(
                {
                    "q": e.item.query,
                    "a": e.item.answer,
                    "ok": e.acceptable,
                    "last_ok": e.last_right,
                    "last": e.item.answer if e.agrees else "#### -1",
                }
            )
            + "\n"
            for e in data
        )
    )
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "gateway.cli",
            "cascade",
            "train",
            str(path),
            "--out",
            str(tmp_path / "scorer.json"),
            "--query-field",
            "q",
            "--answer-field",
            "a",
            "--label-field",
            "ok",
            *extra,
        ],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=ROOT,
        timeout=120,
    )


def test_train_writes_a_scorer_that_generalizes(tmp_path: Path) -> None:
    rng = random.Random(3)
    result = train(tmp_path, examples(rng, 300))
    assert result.returncode == 0, result.stderr
    assert "cross-validated AUC" in result.stdout and "trained on 300 examples" in result.stdout
    model = LearnedModel.load(tmp_path / "scorer.json")
    held_out = synthetic(rng, 100)
    assert auc([model.confidence(e.item) for e in held_out], [e.label for e in held_out]) > 0.9
    assert model.calibration is not None and model.calibration.last_right is None  # no last-tier labels given


def test_the_calibration_curve_round_trips(tmp_path: Path) -> None:
    data = examples(random.Random(4), 300)
    result = train(tmp_path, data, "--last-label-field", "last_ok", "--last-answer-field", "last")
    assert result.returncode == 0, result.stderr
    loaded = LearnedModel.load(tmp_path / "scorer.json")
    in_process = train_matrix(Matrix.of(with_query_vectors(data))).model  # as the command embeds them
    assert loaded.calibration == in_process.calibration  # the same counts, through the file
    assert Calibration.from_json(loaded.calibration.to_json()) == loaded.calibration
    cal = loaded.calibration
    assert cal.examples == 300 and cal.last_right == sum(bool(e.last_right) for e in data)
    assert cal.points[0].accepted == 300 and cal.points[0].disagree == sum(not e.agrees for e in data)
    # what the command prints is where a cascade with this file starts
    start = QualityController(Policy(0.95), cal).promised
    assert start is not None and f"{start:.2f}" in result.stdout.split("<- start")[0].splitlines()[-1]


def test_train_refuses_one_class(tmp_path: Path) -> None:
    data = tmp_path / "examples.jsonl"
    data.write_text(json.dumps({"query": "q", "answer": "a", "label": True}) + "\n")
    result = subprocess.run(
        [sys.executable, "-m", "gateway.cli", "cascade", "train", str(data)],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=tmp_path,
        timeout=60,
    )
    assert result.returncode != 0 and "both" in result.stderr


def test_bundled_scorer_ships_its_calibration() -> None:
    scorer = LearnedScorer.from_file()
    cal = scorer.calibration
    assert cal is not None and cal.examples == 659 and cal.last_right is not None
    controller = QualityController(Policy(0.95), cal)
    e = controller.estimate()
    assert controller.threshold is not None and e.quality_lower_bound >= 0.95 and e.escalation < 0.6
    item = synthetic(random.Random(1), 1)[0].item
    assert np.isclose(scorer.score(item), scorer.model.confidence_of(features(item)))


def test_a_version_1_file_still_loads(tmp_path: Path) -> None:
    model = LearnedModel.load(ROOT / "policies" / "scorers" / "gsm8k_learned.json")
    model.accept.save(tmp_path / "v1.json")
    old = LearnedModel.load(tmp_path / "v1.json")
    item = synthetic(random.Random(2), 1)[0].item
    assert old.last is None and old.calibration is None
    assert old.confidence(item) == model.accept.probability(features(item))


def test_a_user_mistake_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    """A missing FILE, a line that is not JSON, a config whose database has no samples of the
    cascade, an --out that cannot be written: each one `costgate cascade train: ...` line, exit 1
    (an --out in a directory not there yet is no mistake: the directory is made)."""
    (tmp_path / "bad.jsonl").write_text('{"query": "q"\n')
    (tmp_path / "a-file").write_text("")  # a directory that is a file: --out cannot be written
    (tmp_path / "ok.jsonl").write_text(
        "".join(json.dumps({"query": f"q{i}", "answer": "a", "label": i % 2 == 0}) + "\n" for i in range(20))
    )
    (tmp_path / "config.yaml").write_text(f"database_url: sqlite:///{tmp_path}/empty.db\n")
    cases = {
        ("nofile.jsonl",): "costgate cascade train: nofile.jsonl: No such file or directory",
        ("bad.jsonl",): "costgate cascade train: bad.jsonl:1: not JSON (",
        (
            "--from-db",
            "config.yaml",
            "--cascade",
            "auto",
        ): "costgate cascade train: no stored samples of cascade 'auto'",
        ("--from-db", "nope.yaml"): "costgate cascade train: config nope.yaml: ",
        ("ok.jsonl", "--folds", "2", "--out", "a-file/s.json"): "costgate cascade train: cannot write a-file/s.json: ",
    }
    for args, start in cases.items():
        result = subprocess.run(
            [sys.executable, "-m", "gateway.cli", "cascade", "train", *args],
            capture_output=True,
            text=True,
            env=_env(),
            cwd=tmp_path,
            timeout=60,
        )
        assert result.returncode == 1, (args, result.stderr)
        assert result.stderr.startswith(start) and result.stderr.count("\n") == 1, (args, result.stderr)
    made = subprocess.run(  # a directory that is not there yet is made, as `cache calibrate` does
        [sys.executable, "-m", "gateway.cli", "cascade", "train", "ok.jsonl", "--folds", "2", "--out", "new/d/s.json"],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=tmp_path,
        timeout=60,
    )
    assert made.returncode == 0 and (tmp_path / "new" / "d" / "s.json").exists(), made.stderr
