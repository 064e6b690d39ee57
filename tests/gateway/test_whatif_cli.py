"""`costgate whatif FILE` (gateway/commands/whatif_cli.py): recorded requests and answers in, an estimate
of cost, dollars saved and quality with intervals out, no provider called; bad input refused in
one line."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from gateway.cli import main


def recording(path: Path, n: int) -> Path:
    rng = random.Random(0)
    lines = []
    for _ in range(n):
        a, b = rng.randint(2, 99), rng.randint(2, 99)
        q = f"A box holds {a} rows of {b} pens. How many?"
        guess = rng.random() < 1 / 3
        cheap = f"Maybe about {a * b + 3}?" if guess else f"{a} * {b} = {a * b}.\n#### {a * b}"
        lines.append({"q": q, "weak": cheap, "strong": f"#### {a * b}", "weak_ok": not guess, "strong_ok": True})
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return path


def whatif(path: Path, *extra: str) -> list[str]:
    fields = ["--query-field", "q", "--cheap-field", "weak", "--last-field", "strong"]
    labels = ["--cheap-right-field", "weak_ok", "--last-right-field", "strong_ok"]
    return ["whatif", str(path), *fields, *labels, "--no-vectors", "--draws", "3", *extra]


def test_a_recording_gives_cost_savings_and_quality_with_intervals(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = recording(tmp_path / "traffic.jsonl", 150)
    assert main(whatif(path, "--last-tier-quality", "1.0")) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["requests"] == 150 and found["draws"] == 3
    cost = found["cost_vs_last_tier"]
    assert cost["low"] <= cost["mean"] <= cost["high"] and cost["mean"] < 1.0  # it learns, then saves
    assert found["saved_usd"]["mean"] > 0
    assert found["accuracy_vs_last_tier"]["mean"] >= 0.95
    assert found["certified_in_share_of_draws"] == 1.0


def test_a_line_without_the_named_fields_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"q": "What is 2 + 2?", "weak": "4"}\n')
    with pytest.raises(SystemExit, match=r"bad.jsonl:1: missing field 'strong'"):
        main(whatif(path))
    path.write_text("not json\n")
    with pytest.raises(SystemExit, match=r"bad.jsonl:1: not JSON"):
        main(whatif(path))


@pytest.mark.parametrize("bad", ["abc,1", "1", "1,2,3", "1,"])
def test_a_price_that_is_not_two_numbers_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: str
) -> None:
    path = recording(tmp_path / "traffic.jsonl", 5)
    with pytest.raises(SystemExit) as refused:
        main(whatif(path, "--cheap-price", bad))
    assert refused.value.code == 2 and "expected IN,OUT dollars per million tokens" in capsys.readouterr().err
