"""Cascade benchmark: the two configurations issue 13 names, through a running gateway.

Sends each problem of data/gsm8k_dev.jsonl (or the JSONL given) once, in order, through a
FRESH gateway per configuration, in front of a fake upstream (tests/fakes/fake_recorded.py)
that returns the recorded answers of a weak model (Mixtral-8x7B, $0.60/M tokens in and out)
and a strong one (GPT-4-1106, $10/M in, $30/M out):

    rules     {tiers: [weak, strong], quality_target: 0.95}                    (the defaults: it learns
              a scorer from its own samples, issue 27)
    learned   {tiers: [weak, strong], quality_target: 0.95, scorer: learned}   (the bundled scorer;
              the router before the call is on by default in both)

and through `strong` alone, the baseline. Every call counts, shadow calls and the learning
phase included: costs are the gateway ledger's own totals (`/admin/spend?group_by=tag`, the
shadow rows carry the request's tags). Accuracy is against the recorded labels.

The bundled scorer was trained on this very data, so `learned` on it is in-sample. `--folds K`
adds the honest figure: for each fold, `costgate cascade train` fits a scorer and its
calibration on the other folds, and a fresh gateway with `scorer: learned:PATH` replays the
held-out fold in order.

Run: `python bench/cascade.py [DATA] [--folds 3] [--plot docs/cascade_cost_accuracy.png]`
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.gsm8k_problems import DEFAULT_DATA  # noqa: E402
from tests import support  # noqa: E402
from tests.support import GatewayProcess, _env, free_port, model, wait_http  # noqa: E402

# A gateway on the shared 2-core machine (8 developers' load) can take over a minute to start:
# give it five before calling the run failed.
_wait_http = support.wait_http
support.wait_http = lambda url, proc, timeout=300.0: _wait_http(url, proc, timeout)

WEAK, STRONG = "mixtral-8x7b-instruct", "gpt-4-1106-preview"


@dataclass
class Result:
    name: str
    n: int
    correct: int
    cost: Decimal
    requests: int  # ledger rows: one per request, plus one per shadow call
    escalated: int  # answered by the strong tier
    weak_calls: int
    strong_calls: int
    view: dict | None  # /admin/cascades at the end


def correct(row: dict, answer: str) -> bool:
    if answer == row["strong_response"]:
        return bool(row["strong_correct"])
    if answer == row["weak_response"]:
        return bool(row["weak_correct"])
    raise AssertionError("the gateway returned an answer that was never recorded")


async def replay(url: str, key: str, rows: list[dict], name: str, tag: str, concurrency: int) -> list[str]:
    """Every problem through model `name`, in order (`concurrency` in flight); the answers."""
    answers = [""] * len(rows)
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(len(rows)):
        queue.put_nowait(i)
    headers = {"authorization": f"Bearer {key}", "x-costgate-tags": tag}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as client:

        async def worker() -> None:
            while not queue.empty():
                i = queue.get_nowait()
                r = await client.post(
                    "/v1/chat/completions",
                    json={"model": name, "messages": [{"role": "user", "content": rows[i]["prompt"]}]},
                )
                r.raise_for_status()
                answers[i] = r.json()["choices"][0]["message"]["content"]

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return answers


def settled_spend(gw: GatewayProcess, tag: str, at_least: int) -> dict:
    """The tag's ledger totals once the background shadow calls have all been written."""
    last, deadline = None, time.monotonic() + 60
    while time.monotonic() < deadline:
        row = next((r for r in gw.spend("tag")["rows"] if r["group"] == tag), None)
        if row is not None and row["requests"] >= at_least and row == last:
            return row
        last = row
        time.sleep(0.5)
    raise TimeoutError(f"the ledger for {tag} did not settle: {last}")


def fake_calls(fake_url: str) -> dict[str, int]:
    return httpx.get(fake_url.removesuffix("/v1") + "/_stats").json()


def run(work: Path, fake_url: str, rows: list[dict], name: str, cascade: dict | None, concurrency: int) -> Result:
    models = [model("weak", WEAK, fake_url, "0.6", "0.6"), model("strong", STRONG, fake_url, "10", "30")]
    config = {"models": models, "cascades": [cascade] if cascade else [], "ledger_flush_interval_s": 0.2}
    gw = GatewayProcess(config, work / name)
    try:
        before = fake_calls(fake_url)
        target = cascade["name"] if cascade else "strong"
        answers = asyncio.run(replay(gw.url, gw.new_key("bench"), rows, target, f"bench-{name}", concurrency))
        spend = settled_spend(gw, f"bench-{name}", len(rows))
        after = fake_calls(fake_url)
        view = gw.admin("GET", "/admin/cascades").json()["data"][0] if cascade else None
    finally:
        gw.stop()
    return Result(
        name,
        len(rows),
        sum(correct(r, a) for r, a in zip(rows, answers)),
        Decimal(spend["cost_usd"]),
        spend["requests"],
        sum(a == r["strong_response"] != r["weak_response"] for r, a in zip(rows, answers)),
        after.get(WEAK, 0) - before.get(WEAK, 0),
        after.get(STRONG, 0) - before.get(STRONG, 0),
        view,
    )


def cascade(scorer: str | None) -> dict:
    config = {"name": "cascade", "tiers": ["weak", "strong"], "quality_target": 0.95}
    return config | ({"scorer": scorer} if scorer else {})


def train(work: Path, rows: list[dict]) -> Path:
    data, out = work / "train.jsonl", work / "scorer.json"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "gateway.cli",
            "cascade",
            "train",
            str(data),
            "--out",
            str(out),
            "--query-field",
            "prompt",
            "--answer-field",
            "weak_response",
            "--label-field",
            "weak_correct",
            "--last-label-field",
            "strong_correct",
            "--last-answer-field",
            "strong_response",
        ],
        check=True,
        env=_env(),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
    )
    return out


def report(results: list[tuple[Result, Result]]) -> None:
    print(
        f"\n{'run':<26}{'problems':>9}{'accuracy':>9}{'vs strong':>10}{'cost vs strong':>15}{'escalated':>10}"
        f"{'weak calls':>11}{'strong calls':>13}{'shadow':>7}  final state"
    )
    for res, strong in results:
        shadow = res.requests - res.n
        state = (
            ""
            if res.view is None
            else (
                f"threshold {res.view['threshold']}, samples {res.view['samples']}"
                if not res.view["escalate_all"]
                else f"{res.view['mode']}, samples {res.view['samples']}"
            )
            + (f", routed {res.view['router']['routed']}" if res.view and "router" in res.view else "")
        )
        print(
            f"{res.name:<26}{res.n:>9}{res.correct / res.n:>9.1%}{res.correct / strong.correct:>10.1%}"
            f"{float(res.cost / strong.cost):>15.1%}{res.escalated / res.n:>10.1%}{res.weak_calls:>11}"
            f"{res.strong_calls:>13}{shadow:>7}  {state}"
        )
    for res, _ in results:  # the learning curve each cascade reported (GET /admin/cascades)
        curve = (res.view or {}).get("learning_curve") or []
        marks = [p for p in curve if p["requests"] in (20, 50, 100, 200, 300, 400, 500, 600, 650)]
        if marks:
            print(
                f"  {res.name} learning curve: "
                + "; ".join(f"{p['requests']}: cost {p['cost_ratio']:.1%} {p['mode']}" for p in marks)
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="?", default=str(DEFAULT_DATA))
    parser.add_argument("--folds", type=int, default=0, help="also cross-validate the learned scorer (0: no)")
    parser.add_argument("--concurrency", type=int, default=1, help="requests in flight (1: strictly in order)")
    parser.add_argument("--plot", default="", help="write the cost/accuracy plot here")
    args = parser.parse_args()
    rows = [json.loads(line) for line in Path(args.data).read_text().splitlines() if line.strip()]
    results: list[tuple[Result, Result]] = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        answers = work / "answers.jsonl"
        answers.write_text(
            "".join(
                json.dumps({"prompt": r["prompt"], "answers": {WEAK: r["weak_response"], STRONG: r["strong_response"]}})
                + "\n"
                for r in rows
            )
        )
        port = free_port()
        with open(work / "fake.log", "wb") as log:
            fake = subprocess.Popen(
                [sys.executable, "-m", "tests.fakes.fake_recorded", "--answers", str(answers), "--port", str(port)],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=_env(),
                cwd=ROOT,
            )
            try:
                wait_http(f"http://127.0.0.1:{port}/_stats", fake)
                url = f"http://127.0.0.1:{port}/v1"
                strong = run(work, url, rows, "strong", None, args.concurrency)
                for name, scorer in (("rules", None), ("learned (in-sample)", "learned")):
                    results.append((run(work, url, rows, name.split()[0], cascade(scorer), args.concurrency), strong))
                    results[-1][0].name = name
                    print(f"{name} done ({time.monotonic() - started:.0f} s)", flush=True)
                order = np.random.default_rng(0).permutation(len(rows))
                for k, held in enumerate(np.array_split(order, args.folds) if args.folds > 1 else []):
                    fold = work / f"fold{k}"
                    fold.mkdir()
                    held_set = set(held.tolist())
                    scorer = train(fold, [rows[i] for i in order if i not in held_set])
                    test = [rows[i] for i in held]
                    base = run(fold, url, test, "strong", None, args.concurrency)
                    res = run(fold, url, test, "learned", cascade(f"learned:{scorer}"), args.concurrency)
                    res.name = f"learned, fold {k + 1}/{args.folds}"
                    results.append((res, base))
                    print(f"{res.name} done ({time.monotonic() - started:.0f} s)", flush=True)
            finally:
                fake.terminate()
                fake.wait(10)
    report(results)
    if args.plot:
        from bench.cascade_plot import plot

        plot(results, args.data, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
