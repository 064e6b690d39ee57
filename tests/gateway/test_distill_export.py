"""`costgate distill export` end to end (issue 13, item 6): a gateway in front of the recorded
fake upstream serves two teams through two cascades, only one team keeps its text; once the
gateway has stopped (its kept text written), the export reads the config's database."""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.cli import main
from tests.support import FakeUpstream, GatewayProcess, model

pytestmark = pytest.mark.slow  # boots processes: not in the fast lane

WEAK, STRONG = "rec-weak", "rec-strong"
CUT = {"content": "weak and cut", "finish_reason": "length"}  # the rules scorer rejects it: escalated
QUESTIONS = [f"what is {i} + {i}?" for i in range(12)]
RECORDS = [{"prompt": q, "answers": {WEAK: CUT, STRONG: f"#### {2 * i}"}} for i, q in enumerate(QUESTIONS)]
RECORDS.append({"prompt": f"  {QUESTIONS[0]}\n", "answers": {WEAK: CUT, STRONG: "#### 0"}})  # asked again, spaced
SHADOWED_QUESTION = "what is 100 + 1?"
RECORDS.append({"prompt": SHADOWED_QUESTION, "answers": {WEAK: "#### 101", STRONG: "strong: #### 101"}})
REPORTED_QUESTION = "what is 50 + 50?"
RECORDS.append({"prompt": REPORTED_QUESTION, "answers": {WEAK: CUT, STRONG: "#### 1000"}})
OTHER_TEAMS_QUESTION = "the other team's secret question"
RECORDS.append({"prompt": OTHER_TEAMS_QUESTION, "answers": {WEAK: CUT, STRONG: "a secret answer"}})
ROLES = {"system", "user", "assistant"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    """The gateway's config, once its traffic is served and it has stopped."""
    workdir = tmp_path_factory.mktemp("distill")
    answers = workdir / "answers.jsonl"
    answers.write_text("\n".join(json.dumps(r) for r in RECORDS) + "\n")
    fake = FakeUpstream(workdir, "tests.fakes.fake_recorded", ("--answers", str(answers)))
    try:
        gw = GatewayProcess(config(fake.url), workdir / "gw")
        try:
            serve(gw)
        finally:
            gw.stop()  # drains the text writes and the shadow sample
        yield gw
    finally:
        fake.stop()


def config(base: str) -> dict:
    fixed = {"scorer": "rules", "adaptive": False, "shadow_rate": 0.0}
    return {
        "models": [model("weak", WEAK, base, "0.6", "0.6", max_retries=0), model("strong", STRONG, base, "10", "30")],
        "cascades": [
            {"name": "escalating", "tiers": ["weak", "strong"], **fixed, "thresholds": [0.5]},
            {"name": "shadowed", "tiers": ["weak", "strong"], **fixed, "thresholds": [0.0], "shadow_rate": 1.0},
        ],
        "teams": {"keeper": {"keep_text": True}, "other": {"keep_text": False}},
        "cache": {"exact": {"enabled": False}},
    }


def key_of(gw: GatewayProcess, team: str) -> str:
    assert gw.admin("POST", "/admin/teams", json={"name": team}).status_code == 200
    response = gw.admin("POST", "/admin/keys", json={"team": team})
    assert response.status_code == 200
    return response.json()["key"]


def serve(gw: GatewayProcess) -> None:
    keeper, other = gw.client(key_of(gw, "keeper")), gw.client(key_of(gw, "other"))
    for q in QUESTIONS + [REPORTED_QUESTION]:
        raw = keeper.chat.completions.with_raw_response.create(
            model="escalating", messages=[{"role": "user", "content": q}], max_tokens=20
        )
        assert raw.headers["x-costgate-model"] == "strong"
    # the team reports the last one wrong (POST /v1/feedback): kept, but never exported
    request_id = raw.headers["x-costgate-request-id"]
    keeper.post("/feedback", body={"request_id": request_id, "verdict": "wrong"}, cast_to=object)
    # the same prompt again, written differently: one example; streamed, a system message, text parts
    keeper.chat.completions.create(
        model="escalating", messages=[{"role": "user", "content": f"  {QUESTIONS[0]}\n"}], max_tokens=20
    )
    stream = keeper.chat.completions.create(
        model="escalating",
        messages=[{"role": "system", "content": "Answer with the number."}, {"role": "user", "content": QUESTIONS[1]}],
        max_tokens=20,
        stream=True,
    )
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices).strip() == "#### 2"
    keeper.chat.completions.create(
        model="escalating",
        messages=[{"role": "user", "content": [{"type": "text", "text": QUESTIONS[2]}]}],  # the same as plain text
        max_tokens=20,
    )
    raw = other.chat.completions.with_raw_response.create(
        model="escalating", messages=[{"role": "user", "content": OTHER_TEAMS_QUESTION}], max_tokens=20
    )
    assert raw.headers["x-costgate-model"] == "strong"
    # an accepted weak answer, shadow-sampled: the strong answer is kept, the client got the weak one
    raw = keeper.chat.completions.with_raw_response.create(
        model="shadowed", messages=[{"role": "user", "content": SHADOWED_QUESTION}], max_tokens=20
    )
    assert raw.headers["x-costgate-model"] == "weak"
    # a direct request to the last tier is not a cascade's: not kept
    keeper.chat.completions.create(model="strong", messages=[{"role": "user", "content": "direct"}], max_tokens=20)


def export(gw: GatewayProcess, out: Path, *args: str) -> int:
    return main(["distill", "export", "--config", str(gw.config_path), "--out", str(out), *args])


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def assert_fine_tuning_example(line: dict) -> None:
    """OpenAI's chat fine-tuning format, checked here on its own terms."""
    assert list(line) == ["messages"]
    messages = line["messages"]
    assert len(messages) >= 2
    for m in messages:
        assert set(m) == {"role", "content"} and m["role"] in ROLES and isinstance(m["content"], str)
    assert any(m["role"] == "user" for m in messages)
    assert messages[-1]["role"] == "assistant" and messages[-1]["content"].strip()


def test_only_the_opted_in_teams_cascade_text_is_kept(served: GatewayProcess) -> None:
    with sqlite3.connect(served.workdir / "costgate.db") as db:
        rows = db.execute("SELECT cascade, source, team_name, served_model, messages FROM distill_texts").fetchall()
    assert {r[2] for r in rows} == {"keeper"} and {r[3] for r in rows} == {"strong"}
    assert sorted((c, s) for c, s, *_ in rows).count(("escalating", "escalation")) == len(QUESTIONS) + 4
    assert [(c, s) for c, s, *_ in rows if c == "shadowed"] == [("shadowed", "shadow")]
    assert not any(OTHER_TEAMS_QUESTION in r[4] or "direct" in r[4] for r in rows)


def test_escalations_export_as_fine_tuning_examples_deduplicated_and_split_without_reported_wrong(
    served: GatewayProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "train.jsonl"
    assert export(served, out, "--cascade", "escalating", "--holdout", "0.3") == 0
    train, held = lines(out), lines(tmp_path / "train.holdout.jsonl")
    assert train and held
    for line in train + held:
        assert_fine_tuning_example(line)
    assert (out.stat().st_mode & 0o777) == 0o600
    # 12 questions, one asked twice (whitespace), one again as text parts: 12 prompts + 1 with a system message
    prompts = [tuple((m["role"], " ".join(m["content"].split())) for m in ln["messages"][:-1]) for ln in train + held]
    assert len(prompts) == len(set(prompts)) == len(QUESTIONS) + 1
    assert {p[-1][1] for p in prompts} == set(QUESTIONS)
    by_question = {ln["messages"][-2]["content"].strip(): ln["messages"][-1]["content"].strip() for ln in train + held}
    assert by_question == {q: f"#### {2 * i}" for i, q in enumerate(QUESTIONS)}  # the last tier's answers
    assert [{"role": "system", "content": "Answer with the number."}] in [ln["messages"][:1] for ln in train + held]
    assert not any(OTHER_TEAMS_QUESTION in json.dumps(ln) for ln in train + held)
    assert not any(REPORTED_QUESTION in json.dumps(ln) for ln in train + held)  # reported wrong
    reported = capsys.readouterr().out
    assert f"wrote {len(train)} training examples" in reported and f"wrote {len(held)} held-back" in reported
    assert "2 duplicates" in reported

    # the same split every time; with no holdout, one file with every example
    again = tmp_path / "again.jsonl"
    assert export(served, again, "--cascade", "escalating", "--holdout", "0.3") == 0
    assert again.read_text() == out.read_text()
    assert (tmp_path / "again.holdout.jsonl").read_text() == (tmp_path / "train.holdout.jsonl").read_text()
    whole = tmp_path / "whole.jsonl"
    assert export(served, whole, "--cascade", "escalating", "--holdout", "0") == 0
    assert len(lines(whole)) == len(train) + len(held) and not (tmp_path / "whole.holdout.jsonl").exists()


def test_a_shadow_sample_exports_the_last_tiers_answer(served: GatewayProcess, tmp_path: Path) -> None:
    out = tmp_path / "shadow.jsonl"
    assert export(served, out, "--cascade", "shadowed", "--holdout", "0") == 0
    assert lines(out) == [
        {
            "messages": [
                {"role": "user", "content": SHADOWED_QUESTION},
                {"role": "assistant", "content": "strong: #### 101"},
            ]
        }
    ]


def test_an_empty_selection_says_why_and_writes_nothing(
    served: GatewayProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "none.jsonl"
    assert export(served, out, "--cascade", "no-such-cascade") == 1
    assert "no kept text for cascade 'no-such-cascade'" in capsys.readouterr().err
    assert export(served, out, "--cascade", "escalating", "--team", "other") == 1
    assert "no team of other keeps its text" in capsys.readouterr().err
    assert not out.exists()


def test_an_unwritable_out_or_a_bad_holdout_is_one_line_not_a_traceback(
    served: GatewayProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a-file").write_text("")
    out = tmp_path / "a-file" / "auto.jsonl"  # its directory is a file
    assert export(served, out, "--cascade", "escalating") == 2
    err = capsys.readouterr().err
    assert err.startswith(f"costgate distill: cannot write {out}: ") and err.count("\n") == 1
    assert export(served, tmp_path / "a.jsonl", "--cascade", "escalating", "--holdout", "1.5") == 2
    assert capsys.readouterr().err == "costgate distill: --holdout 1.5: must be at least 0 and below 1\n"
    assert not (tmp_path / "a.jsonl").exists()
    made = tmp_path / "new" / "dir" / "auto.jsonl"  # a directory that is not there yet is made
    assert export(served, made, "--cascade", "escalating", "--holdout", "0.3") == 0
    assert made.exists() and made.with_name("auto.holdout.jsonl").exists()


def test_kept_text_past_its_teams_days_is_deleted_when_the_gateway_starts(
    served: GatewayProcess, tmp_path: Path
) -> None:
    """`keep_text_days`: the rows the served gateway kept, in a copy of its database, under a
    config that keeps the team's text for a few seconds only: gone once the gateway starts."""
    workdir = tmp_path / "gw"
    workdir.mkdir()
    shutil.copy(served.workdir / "costgate.db", workdir / "costgate.db")
    settings = config("http://127.0.0.1:9/v1")  # no upstream is called
    settings["teams"] = {"keeper": {"keep_text": True, "keep_text_days": 0.00005}}  # ~4 s
    with sqlite3.connect(workdir / "costgate.db") as db:
        assert db.execute("SELECT count(*) FROM distill_texts").fetchone()[0] > 0
        db.execute("UPDATE distill_texts SET created_at = created_at - 60")  # a minute older
    gw = GatewayProcess(settings, workdir)
    gw.stop()
    with sqlite3.connect(workdir / "costgate.db") as db:
        assert db.execute("SELECT count(*) FROM distill_texts").fetchone()[0] == 0
