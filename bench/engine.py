"""Local engine benchmark on SmolLM2-135M-Instruct: bf16 vs INT8 weights, KV capacity bf16 vs
8-bit, n-gram speculation on vs off, greedy agreement and perplexity of INT8 against bf16, and
float32 (what `dtype: auto` runs on an AMX CPU, engine/command.py `model_dtype_for`) with each
configuration's answer to "What is the capital of France?".

    python bench/engine.py [--model DIR] [--text FILE] [--prompts 8] [--max-tokens 64]

Each configuration runs in its own child process (`--worker`), through vLLM's offline `LLM`
API, so its memory is its own: decode tokens/s (generated tokens / generation wall time,
greedy, all prompts in one batch), peak resident memory, the KV-cache capacity vLLM reports
at start, the greedy token ids and the held text's perplexity (prompt logprobs). Ratios are
printed against the bf16 baseline measured in the same run. `--model` defaults to the
checkpoint `costgate serve` prepares (costgate-data/models/SmolLM2-135M-Instruct); the held
text defaults to /work/shared/data's README.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PROMPTS = [
    "Write a short poem about the sea.",
    "Explain what a GPU is to a child.",
    "List three uses of a hash map.",
    "What is the capital of France? Answer in one sentence.",
    "Give me a recipe for pancakes.",
    "Summarise the plot of Hamlet in two sentences.",
    "Why is the sky blue?",
    "Write a Python function that reverses a string.",
    "Repeat after me: the quick brown fox jumps over the lazy dog. The quick brown fox",
    "Count from one to twenty in words.",
    "Translate 'good morning' into Spanish and French.",
    "What are the benefits of unit tests?",
    "Describe a cat in five words.",
    "Continue the sequence: 1, 2, 3, 4, 5, 6,",
    "Name four planets.",
    "What does HTTP stand for?",
]


def worker(spec: dict) -> dict:
    import logging
    import os

    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(spec.get("kv_gib", 1)))
    from vllm import LLM, SamplingParams

    from engine.kv_cache import reported_kv_tokens

    records: list[str] = []

    class Grab(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())

    logging.getLogger("vllm").addHandler(Grab())
    kwargs = {
        "model": spec["model"],
        "kv_cache_dtype": spec["kv"],
        "dtype": spec.get("dtype", "auto"),
        "enforce_eager": True,
        "max_model_len": 1024,
        "seed": 0,
    }
    if spec.get("speculative"):
        kwargs["speculative_config"] = spec["speculative"]
    start = time.perf_counter()
    llm = LLM(**kwargs)
    load_s = time.perf_counter() - start
    tokenizer = llm.get_tokenizer()
    prompts = [
        tokenizer.apply_chat_template([{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True)
        for p in spec["prompts"]
    ]
    greedy = SamplingParams(temperature=0, max_tokens=spec["max_tokens"], ignore_eos=True)
    llm.generate(prompts[:1], SamplingParams(temperature=0, max_tokens=4))  # warm-up
    start = time.perf_counter()
    outs = llm.generate(prompts, greedy, use_tqdm=False)
    gen_s = time.perf_counter() - start
    single_start = time.perf_counter()
    one = llm.generate(prompts[:1], greedy, use_tqdm=False)  # batch of one: the low-load latency case
    single_s = time.perf_counter() - single_start
    tokens = [list(o.outputs[0].token_ids) for o in outs]
    for _ in range(2):  # the machine is shared: keep the best of three batch-of-one runs
        again = time.perf_counter()
        one = llm.generate(prompts[:1], greedy, use_tqdm=False)
        single_s = min(single_s, time.perf_counter() - again)
    agree = None
    if spec.get("reference"):  # teacher-forced: does this model's top-1 match the reference's greedy token?
        hits = total = 0
        for ref in spec["reference"]:
            ids, start = ref["ids"], ref["start"]
            scored = llm.generate(
                [{"prompt_token_ids": ids}], SamplingParams(max_tokens=1, prompt_logprobs=1), use_tqdm=False
            )[0]
            for i in range(start, len(ids)):
                hits += scored.prompt_logprobs[i][ids[i]].rank == 1
                total += 1
        agree = hits / total
    ppl = None
    if spec.get("text"):
        scored = llm.generate([spec["text"]], SamplingParams(max_tokens=1, prompt_logprobs=0), use_tqdm=False)[0]
        ids = scored.prompt_token_ids
        logprobs = [lp[ids[i]].logprob for i, lp in enumerate(scored.prompt_logprobs) if lp is not None]
        ppl = math.exp(-sum(logprobs) / len(logprobs))
    import psutil

    me = psutil.Process()
    rss = sum(p.memory_info().rss for p in [me, *me.children(recursive=True)])  # front end + engine core
    return {
        "load_s": load_s,
        "decode_tps": sum(map(len, tokens)) / gen_s,
        "single_tps": len(one[0].outputs[0].token_ids) / single_s,
        "rss_mib": rss / 2**20,
        "kv_tokens": reported_kv_tokens("\n".join(records)),
        "tokens": tokens,
        "texts": [o.outputs[0].text for o in outs],
        "ppl": ppl,
        "agree": agree,
        "reference": [
            {"ids": list(o.prompt_token_ids) + list(o.outputs[0].token_ids), "start": len(o.prompt_token_ids)}
            for o in outs
        ],
    }


def run(name: str, spec: dict) -> dict:
    from engine.kv_cache import reported_kv_tokens

    print(f"... {name}", flush=True)
    done = subprocess.run(
        [sys.executable, __file__, "--worker", json.dumps(spec)], capture_output=True, text=True, cwd=ROOT, timeout=1800
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if not lines:
        raise RuntimeError(f"{name} failed:\n{done.stderr[-3000:]}")
    if done.returncode:  # vLLM's engine sometimes aborts at interpreter exit, after the result
        print(f"    (exited with {done.returncode} after printing its result)", flush=True)
    result = json.loads(lines[-1][7:])
    # The engine core is a child process: its start-up log (with the KV capacity) is on stderr.
    result["kv_tokens"] = result["kv_tokens"] or reported_kv_tokens(done.stdout + done.stderr)
    return result


def agreement(a: list[list[int]], b: list[list[int]]) -> float:
    """Share of generated positions where two greedy runs emit the same token, up to the first
    divergence per prompt (after it the contexts differ, so later tokens are not comparable)."""
    same = total = 0
    for x, y in zip(a, b):
        n = min(len(x), len(y))
        prefix = next((i for i in range(n) if x[i] != y[i]), n)
        same += prefix
        total += n
    return same / total if total else 0.0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--worker")
    parser.add_argument("--model", default=str(ROOT / "costgate-data" / "models" / "SmolLM2-135M-Instruct"))
    parser.add_argument("--text", default="/work/shared/data/README.md")
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=64)
    args = parser.parse_args()
    if args.worker:
        print("RESULT " + json.dumps(worker(json.loads(args.worker))), flush=True)
        return
    from engine.config import CPU_8BIT_KV_FLAGS, cpu_flags
    from engine.kv_cache import KvShape, tokens_per_gib
    from engine.quantize import quantize_checkpoint

    bf16 = Path(args.model)
    int8 = bf16.with_name(bf16.name + "-int8")
    if not (int8 / "config.json").exists():
        quantize_checkpoint(bf16, int8)
    text = Path(args.text).read_text()[:3000] if Path(args.text).exists() else None
    base = {"prompts": PROMPTS[: args.prompts], "max_tokens": args.max_tokens, "text": text}
    spec = {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2, "prompt_lookup_max": 5}
    results = {"bf16": run("bf16 weights, bf16 KV", {**base, "model": str(bf16), "kv": "auto"})}
    base["reference"] = results["bf16"]["reference"]
    results["int8"] = run("INT8 weights (W8A8), bf16 KV", {**base, "model": str(int8), "kv": "auto"})
    if cpu_flags() & CPU_8BIT_KV_FLAGS:
        results["int8_fp8kv"] = run("INT8 weights, 8-bit KV (fp8)", {**base, "model": str(int8), "kv": "fp8"})
    else:
        print("8-bit KV skipped: vLLM's CPU attention needs AVX-512 or AMX for it, and this CPU has neither")
    results["fp32"] = run("float32 weights and KV", {**base, "model": str(bf16), "kv": "auto", "dtype": "float32"})
    results["bf16_ngram"] = run(
        "bf16 weights, n-gram speculation", {**base, "model": str(bf16), "kv": "auto", "speculative": spec}
    )
    b = results["bf16"]
    print(f"\nSmolLM2-135M-Instruct, {args.prompts} prompts x {args.max_tokens} greedy tokens, CPU, enforce-eager")
    print(
        f"{'config':<14}{'decode tok/s':>13}{'x bf16':>8}{'batch-1 tok/s':>15}{'x bf16':>8}"
        f"{'RSS MiB':>9}{'KV tokens/GiB':>15}{'ppl':>8}{'top-1 agree':>13}"
    )
    for name, r in results.items():
        ppl = f"{r['ppl']:.2f}" if r["ppl"] else "-"
        agree = f"{r['agree']:.3f}" if r.get("agree") is not None else "-"
        print(
            f"{name:<14}{r['decode_tps']:>13.1f}{r['decode_tps'] / b['decode_tps']:>8.2f}"
            f"{r['single_tps']:>15.1f}{r['single_tps'] / b['single_tps']:>8.2f}"
            f"{r['rss_mib']:>9.0f}{r['kv_tokens'] or 0:>15}{ppl:>8}{agree:>13}"
        )
    print(
        f"weights on disk: bf16 {sum(f.stat().st_size for f in bf16.glob('*.safetensors')) / 2**20:.0f} MiB, "
        f"INT8 {sum(f.stat().st_size for f in int8.glob('*.safetensors')) / 2**20:.0f} MiB"
    )
    eight_bit = results.get("int8_fp8kv", {}).get("kv_tokens")
    print(
        f"KV capacity 8-bit / bf16 (vLLM's report): {eight_bit / b['kv_tokens']:.2f}x"
        if b["kv_tokens"] and eight_bit
        else "KV capacity 8-bit / bf16: not measured (see above) or not reported by vLLM"
    )
    shape = KvShape.from_config(json.loads((bf16 / "config.json").read_text()))
    print(
        "KV tokens per GiB from the config: "
        + ", ".join(f"{d} {tokens_per_gib(shape, d):,}" for d in ("auto", "fp8", "int8_per_token_head"))
    )
    print(
        f"greedy prefix agreement INT8 vs bf16 (free-running, until first divergence): "
        f"{agreement(results['int8']['tokens'], b['tokens']):.3f}"
    )
    print(
        "greedy agreement n-gram speculation vs plain bf16: "
        f"{agreement(results['bf16_ngram']['tokens'], b['tokens']):.3f}"
    )
    france = PROMPTS.index("What is the capital of France? Answer in one sentence.")
    if france < args.prompts:  # the content check no random-weight test can make (docs/engine.md)
        for name, r in results.items():
            answer = r["texts"][france].strip().split("\n")[0][:70]
            print(f"{name:<14}{'Paris' if 'Paris' in answer else 'WRONG':>6}  {answer!r}")


if __name__ == "__main__":
    main()
