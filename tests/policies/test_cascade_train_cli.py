"""`costgate cascade train FILE` writes a scorer the gateway loads."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

from policies.scorers.features import features
from policies.scorers.learned import LogisticModel, auc
from tests.policies.test_scorers import synthetic
from tests.support import ROOT, _env


def test_train_from_labelled_file(tmp_path: Path) -> None:
    rng = random.Random(3)
    examples = synthetic(rng, 200)
    data = tmp_path / "examples.jsonl"
    data.write_text("".join(json.dumps({"q": e.item.query, "a": e.item.answer, "ok": e.label}) + "\n"
                            for e in examples))
    out = tmp_path / "scorer.json"
    result = subprocess.run([sys.executable, "-m", "gateway.cli", "cascade", "train", str(data), "--out", str(out),
                             "--query-field", "q", "--answer-field", "a", "--label-field", "ok"],
                            capture_output=True, text=True, env=_env(), cwd=ROOT, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "cross-validated AUC" in result.stdout and "trained on 200 examples" in result.stdout
    model = LogisticModel.load(out)
    held_out = synthetic(rng, 100)
    assert auc([model.probability(features(e.item)) for e in held_out], [e.label for e in held_out]) > 0.9


def test_train_refuses_one_class(tmp_path: Path) -> None:
    data = tmp_path / "examples.jsonl"
    data.write_text(json.dumps({"query": "q", "answer": "a", "label": True}) + "\n")
    result = subprocess.run([sys.executable, "-m", "gateway.cli", "cascade", "train", str(data)],
                            capture_output=True, text=True, env=_env(), cwd=tmp_path, timeout=60)
    assert result.returncode != 0 and "both" in result.stderr


def test_bundled_scorer_loads() -> None:
    from policies.scorers.learned import LearnedScorer

    assert LearnedScorer.from_file().model.names
