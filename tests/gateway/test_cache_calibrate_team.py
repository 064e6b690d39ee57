"""`costgate cache calibrate --team NAME`, end to end: a team's semantic hits reported wrong through
POST /v1/feedback become labels, the command re-fits from them, and the gateway, configured with
the file it wrote, no longer serves those pairs while it still serves the pair reported right."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from policies.semantic_cache import calibrate_cli as cache_cli_module
from policies.semantic_cache.calibrate_cli import _base_files, read_labelled
from policies.semantic_cache.team_calibration import merge, team_threshold
from policies.semantic_cache.verifier import Verifier
from policies.semantic_cache.verifier_calibration import Labelled
from tests.conftest import standard_models
from tests.support import ROOT, FakeUpstream, GatewayProcess, _env

pytestmark = pytest.mark.slow  # boots processes: not in the fast lane

SEM = {"semantic": True, "max_false_hit_rate": 0.25}
# (stored, asked, verdict): pairs the shipped verifier serves at a 25% bound (an item added:
# "change" / "reset" and "disable" / "enable", one word swapped, it no longer serves at all)
PAIRS = [
    ("How do I change my password?", "How do I change my password and username?", "wrong"),
    ("What is the best laptop for programming?", "What is the best laptop for programming and gaming?", "wrong"),
    ("How do I learn Rust quickly?", "How can I learn Rust quickly?", "right"),
]
BASE_ROWS = 800  # of the repository's hand-judged candidates (bench/data): enough to fit, quick to embed


def calibrate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gateway.cli", "cache", "calibrate", *args],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=ROOT,
        timeout=600,
    )


def ask(gw: GatewayProcess, key: str, text: str) -> tuple[str, str]:
    raw = gw.client(key).chat.completions.with_raw_response.create(
        model="small", temperature=0, messages=[{"role": "user", "content": text}]
    )
    return raw.headers["x-costgate-cache"], raw.headers["x-costgate-request-id"]


def gateway(fake: FakeUpstream, workdir: Path, team: dict) -> GatewayProcess:
    return GatewayProcess({"models": standard_models(fake.url), "cache": {"teams": {"sem": team}}}, workdir)


def test_a_teams_reported_false_hits_are_not_served_by_its_own_verifier(
    tmp_path: Path, fake_upstream: FakeUpstream
) -> None:
    base = tmp_path / "base.jsonl"
    lines = (ROOT / "bench/data/qqp_dev_adjudicated_extra.jsonl").read_text().splitlines()
    base.write_text("\n".join(lines[:BASE_ROWS]))
    out = tmp_path / "sem-verifier.npz"

    gw = gateway(fake_upstream, tmp_path / "before", SEM)
    try:
        key = gw.new_key("sem")
        gw.new_key("quiet")
        for stored, asked, verdict in PAIRS:
            assert ask(gw, key, stored)[0] == "miss"
            status, request_id = ask(gw, key, asked)
            assert status == "semantic", (stored, asked)
            gw.client(key).post("/feedback", body={"request_id": request_id, "verdict": verdict}, cast_to=object)

        quiet = calibrate(str(base), "--team", "quiet", "--config", str(gw.config_path), "--out", str(out))
        assert quiet.returncode == 2 and "no labelled pairs yet" in quiet.stderr and not out.exists()
        unknown = calibrate(str(base), "--team", "nobody", "--config", str(gw.config_path), "--out", str(out))
        assert unknown.returncode == 2 and "no team 'nobody'" in unknown.stderr

        result = calibrate(str(base), "--team", "sem", "--config", str(gw.config_path), "--out", str(out))
        assert result.returncode == 0, result.stderr
        assert "team sem: 3 labelled pairs from its feedback (2 reported wrong)" in result.stdout
        assert "fewer than 20" in result.stdout and "raised from" in result.stdout
        assert f"set cache.teams.sem.verifier: {out}" in result.stdout
    finally:
        gw.stop()

    verifier = Verifier.load(out)
    assert 0.25 in verifier.rates.tolist()
    after = gateway(fake_upstream, tmp_path / "after", {**SEM, "verifier": str(out)})
    try:
        key = after.new_key("sem")
        for stored, asked, verdict in PAIRS:
            assert ask(after, key, stored)[0] == "miss"
            assert ask(after, key, asked)[0] == ("miss" if verdict == "wrong" else "semantic"), (stored, asked)
    finally:
        after.stop()


def test_the_teams_verdict_replaces_the_base_label_of_the_same_pair() -> None:
    base = [Labelled("q1", "s1", True), Labelled("q2", "s2", True)]
    team = [Labelled("q1", "s1", True), Labelled("q1", "s1", False), Labelled("q3", "s3", False)]
    labelled, own, replaced = merge(base, team)
    assert labelled == [Labelled("q2", "s2", True), Labelled("q1", "s1", False), Labelled("q3", "s3", False)]
    assert own == [Labelled("q1", "s1", False), Labelled("q3", "s3", False)] and replaced == 1


@pytest.mark.parametrize(
    ("scores", "wrong", "rate", "at_least", "expected"),
    [
        ([0.7, 0.9], [True, False], 0.25, 0.5, float(np.nextafter(0.7, 2.0))),  # above the wrong one
        ([0.7, 0.9, 0.95, 0.8], [True, False, False, False], 0.25, 0.5, 0.5),  # 1 of 4 wrong: within 25%
        ([0.7], [True], 0.25, 0.8, 0.8),  # already above it
        ([0.3, 0.6], [False, False], 0.05, 0.5, 0.5),  # right reports never loosen the certified threshold
        ([0.999999], [True], 0.25, 0.5, float(np.nextafter(0.999999, 2.0))),
    ],
)
def test_team_threshold(scores, wrong, rate, at_least, expected) -> None:
    assert team_threshold(np.array(scores), np.array(wrong), rate, at_least) == expected


def test_an_installed_gateway_has_the_base_labels_of_the_shipped_verifier() -> None:
    """`--team` without FILEs reads the labels shipped in the package, not the repository's data."""
    args = argparse.Namespace(files=[], team="red")
    (path,) = _base_files(args)
    assert path.is_relative_to(Path(cache_cli_module.__file__).parent)
    labels = read_labelled([path])
    assert len(labels) == 2870
    same = sum(c.same for c in labels)
    assert 0 < same < len(labels)
    extra = read_labelled([ROOT / "bench/data/qqp_dev_adjudicated_extra.jsonl"])
    assert {(c.query, c.stored, c.same) for c in extra} <= {(c.query, c.stored, c.same) for c in labels}
