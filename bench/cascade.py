"""Cascade benchmark: cost and accuracy against always-strong on GSM8K, through the gateway.

Replays data/gsm8k_dev.jsonl (or the JSONL given as argument) THROUGH A RUNNING GATEWAY, in
front of a fake upstream (gateway/testing/fake_recorded.py) that returns the recorded answers
of a weak model (Mixtral-8x7B, $0.60/M tokens in and out) and a strong one (GPT-4-1106,
$10/M in, $30/M out). Cross-validated: the problems are split into K folds; for each fold the
learned scorer is trained with `costgate cascade train` on the other folds, and the fold's
problems — never seen by that scorer — are replayed through cascades at several thresholds,
through `strong` alone and through `weak` alone. Every call the gateway makes is counted,
shadow calls included (5% of traffic by default): costs are read back from the gateway's
own ledger (`/admin/spend?group_by=tag`), not recomputed.

Run: `python bench/cascade.py [DATA] [--folds 3] [--shadow-rate 0.05] [--plot docs/cascade_cost_accuracy.png]`
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from policies.agreement import answers_agree  # noqa: E402
from tests.support import GatewayProcess, _env, free_port, model, wait_http  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "gsm8k_dev.jsonl"
WEAK, STRONG = "mixtral-8x7b-instruct", "gpt-4-1106-preview"
THRESHOLDS = (0.5, 0.6, 0.65, 0.7, 0.72, 0.74, 0.76, 0.78, 0.8, 0.85, 0.9)


def tag(name: str) -> str:
    return "bench-" + name.replace(".", "")


async def replay(url: str, key: str, rows: list[dict], name: str, concurrency: int = 16,
                 label: str | None = None) -> list[str]:
    """Ask every problem through model `name` (tagged `label`); returns the answer each got."""
    answers = [""] * len(rows)
    sem = asyncio.Semaphore(concurrency)
    headers = {"authorization": f"Bearer {key}", "x-costgate-tags": tag(label or name)}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as client:
        async def one(i: int) -> None:
            async with sem:
                r = await client.post("/v1/chat/completions", json={
                    "model": name, "messages": [{"role": "user", "content": rows[i]["prompt"]}]})
                r.raise_for_status()
                answers[i] = r.json()["choices"][0]["message"]["content"]
        await asyncio.gather(*(one(i) for i in range(len(rows))))
    return answers


def correct(row: dict, answer: str) -> bool:
    if answer == row["strong_response"]:
        return bool(row["strong_correct"])
    if answer == row["weak_response"]:
        return bool(row["weak_correct"])
    raise AssertionError("the gateway returned an answer that was never recorded")


def train_scorer(work: Path, name: str, rows: list[dict]) -> Path:
    data, out = work / f"{name}.jsonl", work / f"{name}.json"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    subprocess.run([sys.executable, "-m", "gateway.cli", "cascade", "train", str(data), "--out", str(out),
                    "--query-field", "prompt", "--answer-field", "weak_response", "--label-field", "weak_correct",
                    "--folds", "1"], check=True, env=_env(), cwd=ROOT, stdout=subprocess.DEVNULL)
    return out


def models(fake_url: str) -> list[dict]:
    return [model("weak", WEAK, fake_url, "0.6", "0.6"), model("strong", STRONG, fake_url, "10", "30")]


def adaptive(scorer: Path, shadow_rate: float, target: float) -> dict:
    return {"name": "adaptive", "tiers": ["weak", "strong"], "scorer": f"learned:{scorer}", "thresholds": [0.9],
            "shadow_rate": shadow_rate, "quality_target": target, "min_samples": 100}


def calibrate(work: Path, fake_url: str, scorer: Path, rows: list[dict], target: float) -> dict:
    """Shadow-sample every calibration problem through the adaptive cascade; the samples land in
    the database the fold's gateway then starts from."""
    gw = GatewayProcess({"models": models(fake_url), "cascades": [adaptive(scorer, 1.0, target)],
                         "ledger_flush_interval_s": 0.2}, work / "gw")
    try:
        asyncio.run(replay(gw.url, gw.new_key("bench"), rows, "adaptive", label="calibration"))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            view = gw.admin("GET", "/admin/cascades").json()["data"][0]
            if view["samples"] >= len(rows):
                break
            time.sleep(0.2)
        time.sleep(0.5)
        return {"cost": Decimal(gw.spend("tag")["total_usd"]), "samples": view["samples"]}
    finally:
        gw.stop()


def run_fold(work: Path, fake_url: str, train: list[dict], test: list[dict], shadow_rate: float,
             target: float) -> tuple[dict, dict]:
    scorer = train_scorer(work, "scorer", train)
    # The adaptive cascade's scorer is trained on half the training problems; the other half
    # calibrates its threshold (shadow samples), so its confidences there are out of sample.
    half = len(train) // 2
    calibration_scorer = train_scorer(work, "scorer-half", train[:half])
    calibration = calibrate(work, fake_url, calibration_scorer, train[half:], target)
    cascades = [{"name": f"cascade-{t}", "tiers": ["weak", "strong"], "scorer": f"learned:{scorer}",
                 "thresholds": [t], "shadow_rate": shadow_rate, "adaptive": False} for t in THRESHOLDS]
    cascades.append(adaptive(calibration_scorer, shadow_rate, target))
    gw = GatewayProcess({"models": models(fake_url), "cascades": cascades, "ledger_flush_interval_s": 0.2},
                        work / "gw")
    try:
        key = gw.new_key("bench")
        view = next(c for c in gw.admin("GET", "/admin/cascades").json()["data"] if c["name"] == "adaptive")
        calibration["threshold"] = view["threshold"]
        results = {}
        for name in ["strong", "weak"] + [c["name"] for c in cascades]:
            answers = asyncio.run(replay(gw.url, key, test, name))
            results[name] = {"correct": sum(correct(r, a) for r, a in zip(test, answers)),
                             "escalated": sum(a == r["strong_response"] != r["weak_response"]
                                              for r, a in zip(test, answers)),
                             "agree": sum(answers_agree(a, r["strong_response"]) for r, a in zip(test, answers))}
        time.sleep(0.5)  # let the last shadow calls land
        spend = {r["group"]: r for r in gw.spend("tag")["rows"]}
        for name, res in results.items():
            res["cost"] = Decimal(spend[tag(name)]["cost_usd"])
            res["calls"] = spend[tag(name)]["requests"]
        return results, calibration
    finally:
        gw.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="?", default=str(DEFAULT_DATA))
    parser.add_argument("--folds", type=int, default=3)
    parser.add_argument("--shadow-rate", type=float, default=0.05)
    parser.add_argument("--quality-target", type=float, default=0.8,
                        help="the adaptive cascade's wanted agreement with the strong model")
    parser.add_argument("--plot", default=str(ROOT / "docs" / "cascade_cost_accuracy.png"))
    args = parser.parse_args()
    rows = [json.loads(line) for line in Path(args.data).read_text().splitlines() if line.strip()]
    order = np.random.default_rng(0).permutation(len(rows))
    folds = np.array_split(order, args.folds)
    started = time.monotonic()
    totals: dict[str, dict] = {}
    calibrations: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        answers = work / "answers.jsonl"
        answers.write_text("".join(json.dumps({"prompt": r["prompt"], "answers": {
            WEAK: r["weak_response"], STRONG: r["strong_response"]}}) + "\n" for r in rows))
        port = free_port()
        log = open(work / "fake.log", "wb")
        fake = subprocess.Popen([sys.executable, "-m", "gateway.testing.fake_recorded", "--answers", str(answers),
                                 "--port", str(port)], stdout=log, stderr=subprocess.STDOUT, env=_env(), cwd=ROOT)
        try:
            wait_http(f"http://127.0.0.1:{port}/_stats", fake)
            for k, test_idx in enumerate(folds):
                train = [rows[i] for i in order if i not in set(test_idx)]
                test = [rows[i] for i in test_idx]
                (work / f"fold{k}").mkdir()
                fold, calibration = run_fold(work / f"fold{k}", f"http://127.0.0.1:{port}/v1", train, test,
                                             args.shadow_rate, args.quality_target)
                calibrations.append(calibration)
                for name, res in fold.items():
                    acc = totals.setdefault(name, {"correct": 0, "escalated": 0, "agree": 0, "cost": Decimal(0),
                                                   "calls": 0})
                    for field in acc:
                        acc[field] += res[field]
                print(f"fold {k + 1}/{args.folds} done ({time.monotonic() - started:.0f} s)", flush=True)
        finally:
            fake.terminate()
            fake.wait(10)
            log.close()
    report(totals, len(rows), args)
    report_adaptive(totals, calibrations, len(rows), args)
    return 0


def report(totals: dict[str, dict], n: int, args: argparse.Namespace) -> None:
    strong = totals["strong"]
    s_acc, s_cost = strong["correct"] / n, strong["cost"]
    print(f"\n{n} problems, {args.folds}-fold cross-validated (scorer never saw the problems it scored), "
          f"shadow rate {args.shadow_rate:.0%}")
    print(f"{'policy':<16}{'accuracy':>9}{'vs strong':>10}{'$/problem':>12}{'cost vs strong':>15}"
          f"{'escalated':>10}{'agrees':>8}{'calls':>7}")
    points = []
    for name, res in totals.items():
        acc, cost = res["correct"] / n, res["cost"]
        rel_acc, rel_cost = acc / s_acc, float(cost / s_cost)
        esc = res["escalated"] / n if name not in ("strong", "weak") else float(name == "strong")
        print(f"{name:<16}{acc:>9.1%}{rel_acc:>10.1%}{float(cost) / n:>12.6f}{rel_cost:>15.1%}{esc:>10.1%}"
              f"{res['agree'] / n:>8.1%}{res['calls']:>7}")
        points.append((name, rel_cost, acc))
    meeting = [(name, c, a) for name, c, a in points if name.startswith("cascade") and a / s_acc >= 0.95]
    if meeting:
        best = min(meeting, key=lambda p: p[1])
        print(f"\ncheapest cascade at >= 95% of always-strong accuracy: {best[0]}: "
              f"{1 - best[1]:.1%} cheaper, {best[2] / s_acc:.1%} of its accuracy "
              f"(target: >= 40% cheaper) -> {'MET' if best[1] <= 0.60 else 'NOT MET'}")
    else:
        print("\nno cascade threshold reached 95% of always-strong accuracy")
    plot(points, s_acc, args.plot)


def plot(points: list[tuple[str, float, float]], strong_acc: float, path: str) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed (pip install -e '.[bench]'): no plot")
        return
    cascade = sorted((c, a, name) for name, c, a in points if name.startswith("cascade-"))
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ax.plot([c for c, _, _ in cascade], [a for _, a, _ in cascade], "o-", label="cascade (learned scorer)")
    for c, a, name in cascade:
        ax.annotate(name.split("-")[1], (c, a), textcoords="offset points", xytext=(4, -10), fontsize=7)
    for name, c, a in points:
        if name == "adaptive":
            ax.plot([c], [a], "D", label="adaptive (quality target)")
        elif not name.startswith("cascade"):
            ax.plot([c], [a], "s", label=f"always {name}")
    ax.axhline(0.95 * strong_acc, color="grey", linestyle=":", label="95% of always-strong")
    ax.axvline(0.60, color="grey", linestyle="--", label="40% cheaper")
    ax.set_xlabel("cost relative to always-strong (every call, shadow calls included)")
    ax.set_ylabel("accuracy (held-out folds)")
    ax.set_title("GSM8K dev: cascade cost vs accuracy")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    print(f"plot: {path}")


def report_adaptive(totals: dict[str, dict], calibrations: list[dict], n: int, args: argparse.Namespace) -> None:
    res, strong = totals["adaptive"], totals["strong"]
    thresholds = ", ".join("escalate all" if c["threshold"] is None else f"{c['threshold']:.2f}" for c in calibrations)
    calibration_cost = sum((c["cost"] for c in calibrations), Decimal(0))
    print(f"\nadaptive cascade, quality_target {args.quality_target} (agreement with strong): thresholds the "
          f"controller chose from {sum(c['samples'] for c in calibrations)} calibration samples, per fold: "
          f"{thresholds}")
    print(f"  held-out agreement {res['agree'] / n:.1%} (target {args.quality_target:.0%}), accuracy "
          f"{res['correct'] / strong['correct']:.1%} of always-strong, {1 - float(res['cost'] / strong['cost']):.1%} "
          f"cheaper; the calibration's shadow calls cost ${float(calibration_cost):.4f} once "
          f"({float(calibration_cost / strong['cost']):.1%} of always-strong on these {n} problems)")


if __name__ == "__main__":
    sys.exit(main())
